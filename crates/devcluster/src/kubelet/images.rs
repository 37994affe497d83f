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
}

impl LocalImage {
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            entrypoint_args: Vec::new(),
            default_args: Vec::new(),
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
    fn images_resolve_by_repository() {
        let map = ImageMap::new();
        map.insert("ex.com/echo:dev", LocalImage::new("/bin/echo"));
        assert!(map.resolve("ex.com/echo@sha256:00").is_some());
        assert!(map.resolve("ex.com/other").is_none());
    }
}
