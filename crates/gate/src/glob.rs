//! Rule paths as globs: how the manifest's `gate.files[].paths` match, for the policy's
//! compiled form ([`crate::compiled`]). Each path compiles in the manifest crate's one dialect
//! ([`manifest::gate::glob`], which the rules' checks compile with too). Pure: no file system,
//! no policy types.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use globset::GlobMatcher;
use manifest::gate::glob;

pub use manifest::gate::literal_prefix;

/// `path` is `dir` or lies beneath it (component by component).
pub fn under(path: &Path, dir: &Path) -> bool {
    path.starts_with(dir)
}

/// One component of a glob, for matching what lies below a dir.
#[derive(Debug, Clone)]
enum Part {
    /// `**`: any number of components.
    Any,
    /// `*`, or a component past [`COMPILED_COMPONENTS`]: any one name.
    AnyName,
    /// A name without glob syntax, compared as it is.
    Name(OsString),
    /// Any other component, compiled once per policy however many rules repeat it.
    One(Arc<GlobMatcher>),
}

impl Part {
    fn matches(&self, name: &OsStr) -> bool {
        match self {
            Part::Any | Part::AnyName => true,
            Part::Name(n) => n == name,
            Part::One(m) => m.is_match(name),
        }
    }
}

/// The most distinct components one policy compiles matchers for.
pub const COMPILED_COMPONENTS: usize = 512;

/// The component matchers compiled so far for one policy. A compiled matcher costs memory
/// (around 10 KiB when the regex engine builds a DFA for it), and a policy within the
/// manifest's limits can name 256 paths of 32 wildcards each, 8,192 components: a repeated
/// component is compiled once, literal names and `*` not at all, and past
/// [`COMPILED_COMPONENTS`] distinct ones a component is taken to match any name. Components
/// only judge what may lie below a dir, which only a deny of a moved dir asks, so taking one
/// wider than written denies more, never less.
#[derive(Debug, Default)]
pub struct Components {
    compiled: HashMap<String, Arc<GlobMatcher>>,
}

impl Components {
    fn part(&mut self, component: &str) -> Result<Part, globset::Error> {
        if component == "**" {
            return Ok(Part::Any);
        }
        if component == "*" {
            return Ok(Part::AnyName);
        }
        if !component.contains(['*', '?', '[', ']', '{', '}', '\\']) {
            return Ok(Part::Name(component.into()));
        }
        if let Some(m) = self.compiled.get(component) {
            return Ok(Part::One(m.clone()));
        }
        if self.compiled.len() >= COMPILED_COMPONENTS {
            // The whole path was compiled (and so checked) already: this one is wider.
            return Ok(Part::AnyName);
        }
        let m = Arc::new(glob(component)?);
        self.compiled.insert(component.to_string(), m.clone());
        Ok(Part::One(m))
    }
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
        compiled: &mut Components,
    ) -> Result<Glob, globset::Error> {
        let matcher = glob(pattern)?;
        let parts = match manifest::gate::components(pattern) {
            None => None,
            Some(components) => Some(
                components
                    .into_iter()
                    .map(|c| compiled.part(c))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
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
        let names: Vec<&OsStr> = dir
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
                Some(part) if part.matches(name) => {}
                Some(_) => return false,
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
        let mut c = Components::default();
        let g = Glob::new("".into(), "/data/cache".into(), "/data/cache/**", &mut c).unwrap();
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
        let g = Glob::new("".into(), "/data".into(), "/data/*.log", &mut c).unwrap();
        assert!(g.may_match_below(Path::new("/data")));
        assert!(!g.may_match_below(Path::new("/data/x")));
        let g = Glob::new("".into(), "/data".into(), "/data/*/secret/**", &mut c).unwrap();
        assert!(g.may_match_below(Path::new("/data/x")));
        assert!(g.may_match_below(Path::new("/data/x/secret")));
        assert!(!g.may_match_below(Path::new("/data/x/public")));
        let g = Glob::new("".into(), "/data".into(), "/data/{a/b,c}/x", &mut c).unwrap();
        assert!(g.may_match_below(Path::new("/data/zzz")));
        assert!(!g.may_match_below(Path::new("/etc")));
    }

    #[test]
    fn names_and_stars_match_as_compiled_components_would() {
        let mut c = Components::default();
        let names = ["x", ".hidden", "a.log", "secret", "[x]", "a*b"];
        for component in ["*", "secret", "a.log", "*.log", "a[*]b", "[[]x]"] {
            let part = c.part(component).unwrap();
            let compiled = glob(component).unwrap();
            for name in names {
                assert_eq!(
                    part.matches(OsStr::new(name)),
                    compiled.is_match(name),
                    "{component} against {name}"
                );
            }
        }
        // A repeated component is compiled once.
        let a = Glob::new("".into(), "/d".into(), "/d/a?/a?/**", &mut c).unwrap();
        let b = Glob::new("".into(), "/d".into(), "/d/*/a?", &mut c).unwrap();
        assert_eq!(c.compiled.len(), 4, "{:?}", c.compiled.keys());
        assert!(a.may_match_below(Path::new("/d/ab/ac/x")));
        assert!(!b.may_match_below(Path::new("/d/x/ab")));
        assert!(b.may_match_below(Path::new("/d/x")));
    }

    #[test]
    fn past_the_budget_a_component_matches_any_name_so_a_moved_dir_is_denied_more() {
        let mut c = Components::default();
        for i in 0..COMPILED_COMPONENTS {
            c.part(&format!("n{i}?")).unwrap();
        }
        let g = Glob::new("".into(), "/d".into(), "/d/a?/secret", &mut c).unwrap();
        assert_eq!(c.compiled.len(), COMPILED_COMPONENTS);
        assert!(g.may_match_below(Path::new("/d/zz")), "wider than written");
        assert!(!g.may_match_below(Path::new("/e/zz")));
        assert!(g.matches(Path::new("/d/ab/secret")) && !g.matches(Path::new("/d/zz/secret")));
        // A component compiled before the budget ran out stays exact.
        let h = Glob::new("".into(), "/d".into(), "/d/n0?/x", &mut c).unwrap();
        assert!(!h.may_match_below(Path::new("/d/zz")));
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
