//! Rule paths as globs: how the manifest's `gate.files[].paths` match, for the policy's
//! compiled form ([`crate::compiled`]). Each path compiles in the manifest crate's one dialect
//! ([`manifest::gate::glob`], which the rules' checks compile with too). Pure: no file system,
//! no policy types.

use std::path::{Component, Path, PathBuf};

use globset::GlobMatcher;
use manifest::gate::glob;

/// The leading components of a glob that hold no glob syntax: the dir everything it can
/// match lies under.
pub fn literal_prefix(pattern: &str) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        if part.contains(['*', '?', '[', '{', '\\']) {
            break;
        }
        out.push(part);
    }
    out
}

/// `path` is `dir` or lies beneath it (component by component).
pub fn under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// One component of a glob, for matching what lies below a dir.
#[derive(Debug, Clone)]
enum Part {
    /// `**`: any number of components.
    Any,
    One(GlobMatcher),
}

/// One compiled rule path.
#[derive(Debug, Clone)]
pub struct Glob {
    /// As the rule wrote it.
    pub text: String,
    /// The literal prefix, canonical.
    pub prefix: PathBuf,
    matcher: GlobMatcher,
    /// Component by component; `None` when an alternation spans components (then what may
    /// lie below a dir is judged by the prefix alone).
    parts: Option<Vec<Part>>,
}

impl Glob {
    pub(crate) fn new(
        text: String,
        prefix: PathBuf,
        pattern: &str,
    ) -> Result<Glob, globset::Error> {
        let matcher = glob(pattern)?;
        let spans = pattern
            .split('{')
            .skip(1)
            .any(|alt| alt.split('}').next().is_some_and(|a| a.contains('/')));
        let parts = if spans {
            None
        } else {
            let mut parts = Vec::new();
            for c in pattern.split('/').filter(|c| !c.is_empty()) {
                parts.push(if c == "**" {
                    Part::Any
                } else {
                    Part::One(glob(c)?)
                });
            }
            Some(parts)
        };
        Ok(Glob {
            text,
            prefix,
            matcher,
            parts,
        })
    }

    pub fn matches(&self, path: &Path) -> bool {
        self.matcher.is_match(path)
    }

    /// Some path strictly beneath `dir` may match.
    pub fn may_match_below(&self, dir: &Path) -> bool {
        let Some(parts) = &self.parts else {
            return under(&self.prefix, dir) || under(dir, &self.prefix);
        };
        let names: Vec<&std::ffi::OsStr> = dir
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        for (i, name) in names.iter().enumerate() {
            match parts.get(i) {
                None => return false,
                Some(Part::Any) => return true,
                Some(Part::One(m)) if m.is_match(name) => {}
                Some(Part::One(_)) => return false,
            }
        }
        parts.len() > names.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_may_match_below_a_dir() {
        let g = Glob::new("".into(), "/data/cache".into(), "/data/cache/**").unwrap();
        for (dir, below) in [
            ("/", true),
            ("/data", true),
            ("/data/cache", true),
            ("/data/cache/a/b", true),
            ("/data/other", false),
            ("/etc", false),
        ] {
            assert_eq!(g.may_match_below(Path::new(dir)), below, "{dir}");
        }
        let g = Glob::new("".into(), "/data".into(), "/data/*.log").unwrap();
        assert!(g.may_match_below(Path::new("/data")));
        assert!(!g.may_match_below(Path::new("/data/x")));
        let g = Glob::new("".into(), "/data".into(), "/data/*/secret/**").unwrap();
        assert!(g.may_match_below(Path::new("/data/x")));
        assert!(g.may_match_below(Path::new("/data/x/secret")));
        assert!(!g.may_match_below(Path::new("/data/x/public")));
        let g = Glob::new("".into(), "/data".into(), "/data/{a/b,c}/x").unwrap();
        assert!(g.may_match_below(Path::new("/data/zzz")));
        assert!(!g.may_match_below(Path::new("/etc")));
    }

    #[test]
    fn literal_prefixes_stop_at_glob_syntax() {
        assert_eq!(
            literal_prefix("/data/cache/**"),
            PathBuf::from("/data/cache")
        );
        assert_eq!(literal_prefix("/data/c*/x"), PathBuf::from("/data"));
        assert_eq!(literal_prefix("/**"), PathBuf::from("/"));
        assert_eq!(literal_prefix("/etc/hosts"), PathBuf::from("/etc/hosts"));
    }
}
