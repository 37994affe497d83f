//! The headers of every answer from a plugin's bundle (the API server's `GET /ui/v1/{link}/...`,
//! and `loop-plugins conformance`'s stand-in for it, which draws a plugin's panels and cards
//! the way the host does): the reference's content security policy
//! ("Panels": an opaque origin; scripts, styles, images, fonts and fetches only from the
//! plugin's own bundle, plus `data:`/`blob:` for images, fonts and media; no inline script, no
//! `eval`, no frames, no form submission) and the headers around it. One function builds them
//! all, so a route cannot forget one; each directive has its test below.
//!
//! The bundle's own URL prefix (`http://host/ui/v1/<link>/`) is the only source named: a
//! sandboxed page has an opaque origin, so `'self'` would name nothing dependable, and another
//! plugin's bundle (another link) or the host API (another path) do not match the prefix.
//!
//! That opaque origin (`null`) makes every file the page loads in CORS mode (a module script,
//! a `fetch` of its own `data.json`) a cross-origin request, which the browser refuses without
//! `Access-Control-Allow-Origin`; so every file is shared with any origin (`*`, never with
//! credentials). It gives nothing away: the link is the grant, whoever holds it may read the
//! file anyway, and the policy, not CORS, keeps the page from reaching anything else. The
//! browser tests (`tests/e2e/browser.rs`) saw the bridge module refused before this.
//!
//! Pure, over values: it depends on `http`'s header types alone.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// What the headers of one answer depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer<'a> {
    /// The bundle's URL prefix, absolute, ending in `/`.
    pub bundle_url: &'a str,
    /// The file's path in the bundle: its content type comes from its extension.
    pub path: &'a str,
    /// The image digest the bytes come from: the entity tag.
    pub digest: &'a str,
    /// Seconds until the link expires: how long a browser may keep the answer.
    pub max_age: u64,
}

/// The content security policy of a bundle at `bundle_url`.
pub fn content_security_policy(bundle_url: &str) -> String {
    let own = bundle_url;
    [
        "default-src 'none'".to_string(),
        format!("script-src {own}"),
        format!("style-src {own}"),
        format!("img-src {own} data: blob:"),
        format!("font-src {own} data: blob:"),
        format!("media-src {own} data: blob:"),
        format!("connect-src {own}"),
        "frame-src 'none'".to_string(),
        "child-src 'none'".to_string(),
        "worker-src 'none'".to_string(),
        "object-src 'none'".to_string(),
        "form-action 'none'".to_string(),
        "base-uri 'none'".to_string(),
        "sandbox allow-scripts".to_string(),
    ]
    .join("; ")
}

/// Every header of an answer carrying a bundle's file.
pub fn headers(answer: &Answer<'_>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut set = |name: HeaderName, value: String| {
        headers.insert(
            name,
            HeaderValue::from_str(&value).expect("built from header-safe parts"),
        );
    };
    set(
        header::CONTENT_SECURITY_POLICY,
        content_security_policy(answer.bundle_url),
    );
    set(header::CONTENT_TYPE, content_type(answer.path).to_string());
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff".into());
    set(header::REFERRER_POLICY, "no-referrer".into());
    set(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*".into());
    set(header::ETAG, format!("\"{}\"", answer.digest));
    set(
        header::CACHE_CONTROL,
        format!("private, max-age={}, immutable", answer.max_age),
    );
    headers
}

/// The headers of a refusal (403, 404): the same policy, so even an error page runs nothing.
pub fn refusal_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers
}

/// A file's content type, from its extension; what the browser is not told, it must not guess
/// (`nosniff`), so an unknown extension is an opaque download.
pub fn content_type(path: &str) -> &'static str {
    let extension = path
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match extension.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "ico" => "image/x-icon",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "otf" => "font/otf",
        "wasm" => "application/wasm",
        "mp3" => "audio/mpeg",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "http://api.test/ui/v1/LINK/";

    fn answer() -> Answer<'static> {
        Answer {
            bundle_url: OWN,
            path: "main/index.html",
            digest: "sha256:abc",
            max_age: 300,
        }
    }

    /// The policy's directives by name, each with its sources.
    fn directives() -> Vec<(String, Vec<String>)> {
        let headers = headers(&answer());
        let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        csp.split(';')
            .map(|d| {
                let mut words = d.split_whitespace().map(String::from);
                (words.next().unwrap(), words.collect())
            })
            .collect()
    }

    fn sources(name: &str) -> Vec<String> {
        directives()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no {name} directive"))
            .1
    }

    #[test]
    fn an_opaque_origin_that_may_run_scripts() {
        assert_eq!(sources("sandbox"), ["allow-scripts"]);
        assert!(
            !directives()
                .iter()
                .any(|(_, s)| s.iter().any(|s| s == "allow-same-origin"))
        );
    }

    #[test]
    fn nothing_loads_that_a_directive_does_not_name() {
        assert_eq!(sources("default-src"), ["'none'"]);
    }

    #[test]
    fn scripts_only_from_the_own_bundle_no_inline_no_eval() {
        assert_eq!(sources("script-src"), [OWN]);
    }

    #[test]
    fn styles_only_from_the_own_bundle() {
        assert_eq!(sources("style-src"), [OWN]);
    }

    #[test]
    fn images_fonts_and_media_from_the_own_bundle_data_and_blob() {
        for name in ["img-src", "font-src", "media-src"] {
            assert_eq!(sources(name), [OWN, "data:", "blob:"], "{name}");
        }
    }

    #[test]
    fn fetches_only_to_the_own_bundle() {
        assert_eq!(sources("connect-src"), [OWN]);
    }

    #[test]
    fn no_frames_workers_or_plugins() {
        for name in ["frame-src", "child-src", "worker-src", "object-src"] {
            assert_eq!(sources(name), ["'none'"], "{name}");
        }
    }

    #[test]
    fn no_form_submission() {
        assert_eq!(sources("form-action"), ["'none'"]);
    }

    #[test]
    fn no_base_element() {
        assert_eq!(sources("base-uri"), ["'none'"]);
    }

    #[test]
    fn nothing_unsafe_anywhere() {
        for (name, sources) in directives() {
            for s in sources {
                assert!(!s.starts_with("'unsafe"), "{name} allows {s}");
                assert!(s != "*" && s != "'self'", "{name} allows {s}");
            }
        }
    }

    #[test]
    fn no_sniffing_no_referrer_type_from_the_file_cached_by_digest() {
        let headers = headers(&answer());
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(headers[header::ETAG], "\"sha256:abc\"");
        assert_eq!(
            headers[header::CACHE_CONTROL],
            "private, max-age=300, immutable"
        );
    }

    #[test]
    fn files_are_shared_with_the_opaque_origin_without_credentials() {
        let headers = headers(&answer());
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_CREDENTIALS));
    }

    #[test]
    fn content_types_by_extension_and_unknown_is_opaque() {
        assert_eq!(content_type("a/app.JS"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("a/style.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("logo.svg"), "image/svg+xml");
        assert_eq!(content_type("f.woff2"), "font/woff2");
        assert_eq!(content_type("README"), "application/octet-stream");
        assert_eq!(content_type("x.exe"), "application/octet-stream");
    }

    #[test]
    fn refusals_run_nothing_and_are_not_kept() {
        let headers = refusal_headers();
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY],
            "default-src 'none'; sandbox"
        );
        assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    }
}
