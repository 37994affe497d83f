//! `GET /ui/v1/{link}/{*path}`: a file of a plugin's bundle, for whoever holds the link. It is
//! outside `/api/...` and takes no token: the link is the grant (the page is in a sandboxed
//! frame with an opaque origin, so it could not send a credential anyway). The order of the
//! checks is the module's contract: the link verifies (403), the plugin still runs the digest
//! the link names (404), the path is a regular file of that bundle (404); only then is the
//! bundle read (cache first) and the file answered with [`super::policy::headers`].

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kube::runtime::reflector::ObjectRef;
use model::resources::Plugin;
use tokio::sync::watch;

use super::bundle::Bundle;
use super::cache::BundleCache;
use super::link::{self, Link, LinkKeys};
use super::policy::{self, Answer};
use super::source::BundleSource;
use crate::index::Index;

/// Where bundles are served.
pub const PREFIX: &str = "/ui/v1";

/// What the route reads.
#[derive(Clone)]
pub struct UiState {
    pub index: Arc<Index>,
    /// The keys links verify under; None until the Secret was read once.
    pub keys: watch::Receiver<Option<LinkKeys>>,
    pub cache: Arc<Mutex<BundleCache>>,
    pub source: Arc<dyn BundleSource>,
}

impl UiState {
    /// Drops the cached bundles of images no Plugin names any more.
    pub fn prune(&self) {
        let live: Vec<String> = self
            .index
            .plugins
            .state()
            .iter()
            .filter_map(|p| pinned_digest(p))
            .collect();
        self.cache
            .lock()
            .expect("never poisoned")
            .keep_only(|d| live.iter().any(|l| l == d));
    }
}

/// The route, with its state.
pub fn router(state: UiState) -> Router {
    Router::new()
        .route(&format!("{PREFIX}/{{link}}/{{*path}}"), get(serve_file))
        .with_state(state)
}

async fn serve_file(
    State(state): State<UiState>,
    Path((token, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let now = jiff::Timestamp::now().as_second();
    let Some(keys) = state.keys.borrow().clone() else {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "link keys not read yet");
    };
    let link = match link::verify(&keys, &token, now) {
        Ok(link) => link,
        Err(e) => {
            tracing::debug!(error = %e, "link refused");
            return refuse(StatusCode::FORBIDDEN, "this link opens nothing");
        }
    };
    let Some(image) = running_image(&state.index, &link) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "the plugin no longer runs this image",
        );
    };
    let bundle = match bundle(&state, &link.digest, &image).await {
        Ok(bundle) => bundle,
        Err(e) => {
            tracing::warn!(error = %e, %image, "bundle not read");
            return refuse(
                StatusCode::BAD_GATEWAY,
                "the plugin's image could not be read",
            );
        }
    };
    let file = match bundle.file(&path) {
        Ok(file) => file.clone(),
        Err(e) => {
            tracing::debug!(error = %e, "path refused");
            return refuse(StatusCode::NOT_FOUND, "no such file in the bundle");
        }
    };
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            h.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
        })
        .unwrap_or("localhost");
    let bundle_url = format!("http://{host}{PREFIX}/{token}/");
    let answer = Answer {
        bundle_url: &bundle_url,
        path: &path,
        digest: &link.digest,
        max_age: (link.expires - now).max(0) as u64,
    };
    (policy::headers(&answer), file.as_slice().to_vec()).into_response()
}

/// The Plugin's image, when it still names the digest the link was signed for.
fn running_image(index: &Index, link: &Link) -> Option<String> {
    let plugin = index.plugins.get(&ObjectRef::new(&link.plugin))?;
    (pinned_digest(&plugin).as_deref() == Some(link.digest.as_str()))
        .then(|| plugin.spec.image.clone())
}

/// The digest a Plugin's image is pinned to, as admission read it: the one its links may
/// name.
pub fn pinned_digest(plugin: &Plugin) -> Option<String> {
    let digest = plugin.status.as_ref()?.image.as_ref()?.digest.clone();
    plugin
        .spec
        .image
        .ends_with(&format!("@{digest}"))
        .then_some(digest)
}

async fn bundle(
    state: &UiState,
    digest: &str,
    image: &str,
) -> Result<Arc<Bundle>, super::source::SourceError> {
    if let Some(bundle) = state.cache.lock().expect("never poisoned").get(digest) {
        return Ok(bundle);
    }
    let registry = state.index.host_config().spec.plugins.registry.clone();
    let bundle = Arc::new(state.source.read(image, &registry).await?);
    state
        .cache
        .lock()
        .expect("never poisoned")
        .put(digest, bundle.clone());
    Ok(bundle)
}

fn refuse(status: StatusCode, why: &'static str) -> Response {
    (status, policy::refusal_headers(), why).into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::body::Body;
    use axum::http::Request;
    use futures::future::BoxFuture;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use model::resources::{ImageStatus, PluginStatus, RegistryConfig};
    use tower::ServiceExt;

    use super::*;
    use crate::plugin_api::tests::fixtures;
    use crate::ui::link::{LinkKey, Page};
    use crate::ui::source::SourceError;

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    /// A registry in memory that counts its reads.
    struct Images {
        reads: AtomicUsize,
    }

    impl BundleSource for Images {
        fn read<'a>(
            &'a self,
            image: &'a str,
            _: &'a RegistryConfig,
        ) -> BoxFuture<'a, Result<Bundle, SourceError>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            assert!(image.ends_with(DIGEST), "{image}");
            let file = |s: &str| Arc::new(s.as_bytes().to_vec());
            Box::pin(async move {
                Ok(Bundle::from_files([
                    ("main/index.html".to_string(), file("<script src=app.js>")),
                    ("main/app.js".to_string(), file("connect()")),
                ]))
            })
        }
    }

    fn keys() -> LinkKeys {
        LinkKeys {
            current: LinkKey {
                id: "k".into(),
                secret: b"key".to_vec(),
            },
            previous: None,
        }
    }

    struct Case {
        app: Router,
        images: Arc<Images>,
        state: UiState,
        plugins: Writer<Plugin>,
    }

    fn admitted(digest: &str) -> Plugin {
        let mut plugin = fixtures::plugin(&[]);
        plugin.status = Some(PluginStatus {
            image: Some(ImageStatus {
                digest: digest.into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        plugin
    }

    fn case() -> Case {
        let (index, mut writers) = Index::in_memory();
        writers
            .plugins
            .apply_watcher_event(&watcher::Event::Apply(admitted(DIGEST)));
        let images = Arc::new(Images {
            reads: AtomicUsize::new(0),
        });
        let (_, keys) = watch::channel(Some(keys()));
        let state = UiState {
            index,
            keys,
            cache: Arc::new(Mutex::new(BundleCache::new(1 << 20))),
            source: images.clone(),
        };
        Case {
            app: router(state.clone()),
            images,
            state,
            plugins: writers.plugins,
        }
    }

    fn link_for(plugin: &str, expires_in: i64) -> String {
        let link = Link {
            plugin: plugin.into(),
            digest: DIGEST.into(),
            chat: "ns/chat".into(),
            page: Page::Panel("main".into()),
            expires: jiff::Timestamp::now().as_second() + expires_in,
        };
        link::sign(&keys(), &link).unwrap()
    }

    async fn get(app: &Router, uri: &str) -> Response {
        app.clone()
            .oneshot(
                Request::get(uri)
                    .header("host", "api.test:8080")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_good_link_serves_the_file_under_the_policy_and_reads_the_image_once() {
        let case = case();
        let token = link_for(fixtures::PLUGIN, 600);
        let answer = get(&case.app, &format!("/ui/v1/{token}/main/index.html")).await;
        assert_eq!(answer.status(), StatusCode::OK);
        let csp = answer.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            csp.contains(&format!("script-src http://api.test:8080/ui/v1/{token}/;")),
            "{csp}"
        );
        assert_eq!(
            answer.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let body = axum::body::to_bytes(answer.into_body(), 1 << 20)
            .await
            .unwrap();
        assert_eq!(&body[..], b"<script src=app.js>");
        let js = get(&case.app, &format!("/ui/v1/{token}/main/app.js")).await;
        assert_eq!(js.status(), StatusCode::OK);
        assert_eq!(
            case.images.reads.load(Ordering::SeqCst),
            1,
            "cached by digest"
        );
    }

    #[tokio::test]
    async fn refused_links_read_nothing() {
        let case = case();
        let token = link_for(fixtures::PLUGIN, 600);
        let mut changed = token.clone().into_bytes();
        changed[3] = if changed[3] == b'A' { b'B' } else { b'A' };
        let changed = String::from_utf8(changed).unwrap();
        let expired = link_for(fixtures::PLUGIN, -1);
        let other_plugin = link_for("other", 600);
        for (token, status) in [
            (changed.as_str(), StatusCode::FORBIDDEN),
            (expired.as_str(), StatusCode::FORBIDDEN),
            ("garbage", StatusCode::FORBIDDEN),
            (other_plugin.as_str(), StatusCode::NOT_FOUND),
        ] {
            let answer = get(&case.app, &format!("/ui/v1/{token}/main/index.html")).await;
            assert_eq!(answer.status(), status, "{token}");
            assert_eq!(
                answer.headers()[header::CONTENT_SECURITY_POLICY],
                "default-src 'none'; sandbox"
            );
        }
        assert_eq!(case.images.reads.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn paths_out_of_the_bundle_are_not_found() {
        let case = case();
        let token = link_for(fixtures::PLUGIN, 600);
        for path in [
            "main/../../plugin.json",
            "main/%2e%2e/%2e%2e/plugin.json",
            "..%2f..%2fplugin.json",
            "main/%252e%252e/plugin.json",
            "main//index.html",
            "main",
            "plugin.json",
        ] {
            let answer = get(&case.app, &format!("/ui/v1/{token}/{path}")).await;
            assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[tokio::test]
    async fn a_plugin_on_another_image_or_removed_serves_nothing_and_its_bundle_goes() {
        let mut case = case();
        let token = link_for(fixtures::PLUGIN, 600);
        let uri = format!("/ui/v1/{token}/main/index.html");
        assert_eq!(get(&case.app, &uri).await.status(), StatusCode::OK);
        assert!(case.state.cache.lock().unwrap().bytes() > 0);
        let other = format!("sha256:{}", "1".repeat(64));
        let mut upgraded = admitted(&other);
        upgraded.spec.image = format!("registry.local/cogtest@{other}");
        case.plugins
            .apply_watcher_event(&watcher::Event::Apply(upgraded.clone()));
        assert_eq!(get(&case.app, &uri).await.status(), StatusCode::NOT_FOUND);
        case.state.prune();
        assert_eq!(case.state.cache.lock().unwrap().bytes(), 0);
        case.plugins
            .apply_watcher_event(&watcher::Event::Delete(upgraded));
        assert_eq!(get(&case.app, &uri).await.status(), StatusCode::NOT_FOUND);
    }
}
