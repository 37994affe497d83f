//! `loop-plugins console [--namespace NS] [--open]`: the console's URL for the current
//! kubeconfig's user. The console signs in with a Kubernetes token; when the kubeconfig's
//! user has one (`token`, or `tokenFile`), it goes in the URL's fragment (`#token=...`), which
//! the browser never sends to a server and the page forgets once read. A user who signs in
//! otherwise (client certificates, an exec plugin) is told how to make a token.
//!
//! The kubeconfig is read as `kubectl` reads it: `$KUBECONFIG` (the first file of the list
//! that exists), else `~/.kube/config`; the current context names the user and the default
//! namespace. Everything here is pure but [`read_kubeconfig`].

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Why the console's URL could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("no kubeconfig: set KUBECONFIG or write ~/.kube/config")]
    NoKubeconfig,
    #[error("reading the kubeconfig {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the kubeconfig {path} is not valid YAML: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("the kubeconfig has no current context (kubectl config use-context NAME)")]
    NoContext,
    #[error("the kubeconfig's current context {0:?} is not among its contexts")]
    UnknownContext(String),
    #[error("reading the token file {path} of user {user}: {source}")]
    TokenFile {
        user: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The parts of a kubeconfig the console needs.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Kubeconfig {
    #[serde(rename = "current-context", default)]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: Vec<NamedContext>,
    #[serde(default)]
    pub users: Vec<NamedUser>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct NamedContext {
    pub name: String,
    #[serde(default)]
    pub context: Option<Context>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Context {
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct NamedUser {
    pub name: String,
    #[serde(default)]
    pub user: Option<User>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct User {
    #[serde(default)]
    pub token: Option<String>,
    #[serde(rename = "tokenFile", default)]
    pub token_file: Option<String>,
}

/// How the current user signs in to the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signin {
    /// A bearer token the kubeconfig holds.
    Token(String),
    /// A token file the kubeconfig names (read by [`resolve_token`]).
    TokenFile(PathBuf),
    /// None: the user signs in otherwise; the name is the kubeconfig's user.
    NoToken { user: String },
}

/// The current context's user, how it signs in, and its namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    pub context: String,
    pub user: String,
    pub namespace: Option<String>,
    pub signin: Signin,
}

impl Current {
    /// No kubeconfig at all: a token given on the command line stands alone.
    pub fn nobody() -> Self {
        Current {
            context: "none".into(),
            user: String::new(),
            namespace: None,
            signin: Signin::NoToken {
                user: String::new(),
            },
        }
    }
}

/// The current context of a kubeconfig.
pub fn current(config: &Kubeconfig) -> Result<Current, ConsoleError> {
    let name = config
        .current_context
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or(ConsoleError::NoContext)?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| ConsoleError::UnknownContext(name.clone()))?
        .context
        .clone()
        .unwrap_or_default();
    let user = context.user.clone().unwrap_or_default();
    let found = config
        .users
        .iter()
        .find(|u| u.name == user)
        .and_then(|u| u.user.clone())
        .unwrap_or_default();
    let signin = match (
        found.token.filter(|t| !t.trim().is_empty()),
        found.token_file,
    ) {
        (Some(token), _) => Signin::Token(token.trim().to_string()),
        (None, Some(file)) => Signin::TokenFile(PathBuf::from(file)),
        (None, None) => Signin::NoToken { user: user.clone() },
    };
    Ok(Current {
        context: name,
        user,
        namespace: context.namespace.filter(|n| !n.is_empty()),
        signin,
    })
}

/// `current` signing in with a token given on the command line (`--token`) instead.
pub fn given_token(current: Current, token: &str) -> Current {
    Current {
        context: format!("{}, with the token given", current.context),
        user: "the token's user".into(),
        signin: Signin::Token(token.to_string()),
        ..current
    }
}

/// The console's URL: `<api>/console/`, with the namespace and, when there is one, the token
/// in the fragment.
pub fn url(api: &str, namespace: &str, token: Option<&str>) -> String {
    let mut fragment = format!("namespace={}", encode(namespace));
    if let Some(token) = token {
        fragment.push_str(&format!("&token={}", encode(token)));
    }
    format!("{}/console/#{fragment}", api.trim_end_matches('/'))
}

/// What `loop-plugins console` prints: the URL, and without a token, how to get one.
pub fn text(api: &str, namespace: &str, current: &Current, token: Option<&str>) -> String {
    let link = url(api, namespace, token);
    match token {
        Some(_) => format!(
            "The console for {user} (context {context}), namespace {namespace}:\n\n  {link}\n\n\
             The link holds your token in its fragment, which the browser does not send to any \
             server; treat it as the token itself.\n",
            user = current.user,
            context = current.context,
        ),
        None => format!(
            "The console, namespace {namespace}:\n\n  {link}\n\n\
             Your kubeconfig's user {user} has no bearer token to sign in with (it signs in \
             with a certificate or a plugin). Make one and paste it into the console:\n\n  \
             kubectl -n {namespace} create serviceaccount console\n  \
             kubectl -n {namespace} create rolebinding console --clusterrole=loop-plugins-host-api-caller \
             --serviceaccount={namespace}:console\n  \
             kubectl -n {namespace} create token console\n",
            user = current.user,
        ),
    }
}

/// Percent-encodes what a URL fragment's `key=value` may not hold as it is.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The kubeconfig files to try, as kubectl does: `$KUBECONFIG`'s list, else `~/.kube/config`.
pub fn kubeconfig_paths(kubeconfig_env: Option<&str>, home: Option<&Path>) -> Vec<PathBuf> {
    match kubeconfig_env.filter(|v| !v.is_empty()) {
        Some(list) => std::env::split_paths(list).collect(),
        None => home
            .map(|h| vec![h.join(".kube").join("config")])
            .unwrap_or_default(),
    }
}

/// Reads the first kubeconfig of `paths` that exists.
pub fn read_kubeconfig(paths: &[PathBuf]) -> Result<Kubeconfig, ConsoleError> {
    let path = paths
        .iter()
        .find(|p| p.is_file())
        .ok_or(ConsoleError::NoKubeconfig)?;
    let text = std::fs::read_to_string(path).map_err(|source| ConsoleError::Read {
        path: path.clone(),
        source,
    })?;
    serde_saphyr::from_str(&text).map_err(|e| ConsoleError::Parse {
        path: path.clone(),
        message: e.to_string(),
    })
}

/// The token a sign-in carries, reading a token file.
pub fn resolve_token(current: &Current) -> Result<Option<String>, ConsoleError> {
    match &current.signin {
        Signin::Token(t) => Ok(Some(t.clone())),
        Signin::TokenFile(path) => std::fs::read_to_string(path)
            .map(|t| Some(t.trim().to_string()).filter(|t| !t.is_empty()))
            .map_err(|source| ConsoleError::TokenFile {
                user: current.user.clone(),
                path: path.clone(),
                source,
            }),
        Signin::NoToken { .. } => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "
apiVersion: v1
kind: Config
current-context: dev
contexts:
  - name: dev
    context: { cluster: dev, user: alice, namespace: team }
  - name: admin
    context: { cluster: dev, user: admin }
users:
  - name: alice
    user: { token: \"eyJh.b+c/d=\" }
  - name: admin
    user: { client-certificate-data: AAAA, client-key-data: BBBB }
";

    fn config() -> Kubeconfig {
        serde_saphyr::from_str(CONFIG).unwrap()
    }

    #[test]
    fn a_users_token_goes_in_the_fragment_encoded() {
        let current = current(&config()).unwrap();
        assert_eq!(current.namespace.as_deref(), Some("team"));
        assert_eq!(current.signin, Signin::Token("eyJh.b+c/d=".into()));
        assert_eq!(
            url("http://127.0.0.1:8080/", "team", Some("eyJh.b+c/d=")),
            "http://127.0.0.1:8080/console/#namespace=team&token=eyJh.b%2Bc%2Fd%3D"
        );
        let printed = text("http://api", "team", &current, Some("t"));
        assert!(
            printed.contains("http://api/console/#namespace=team&token=t"),
            "{printed}"
        );
    }

    #[test]
    fn a_certificate_user_is_told_how_to_make_a_token() {
        let mut c = config();
        c.current_context = Some("admin".into());
        let current = current(&c).unwrap();
        assert_eq!(
            current.signin,
            Signin::NoToken {
                user: "admin".into()
            }
        );
        let printed = text("http://api", "team", &current, None);
        assert!(
            printed.contains("http://api/console/#namespace=team\n"),
            "{printed}"
        );
        assert!(
            printed.contains("kubectl -n team create token console"),
            "{printed}"
        );
        assert!(!printed.contains("token="), "{printed}");
    }

    #[test]
    fn a_context_that_is_not_there_is_said() {
        let mut c = config();
        c.current_context = Some("gone".into());
        assert!(matches!(current(&c), Err(ConsoleError::UnknownContext(n)) if n == "gone"));
        c.current_context = None;
        assert!(matches!(current(&c), Err(ConsoleError::NoContext)));
    }

    #[test]
    fn kubeconfig_is_looked_for_as_kubectl_does() {
        assert_eq!(
            kubeconfig_paths(Some("/a:/b"), Some(Path::new("/home/x"))),
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(
            kubeconfig_paths(None, Some(Path::new("/home/x"))),
            [PathBuf::from("/home/x/.kube/config")]
        );
    }
}
