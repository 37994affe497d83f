//! The headers of every console answer: its own strict policy, not the bundles'. The console
//! is the host page, so it runs its own scripts and styles (`'self'`, files only: no inline
//! script, style attribute or `eval`), talks only to this server (`connect-src 'self'`: the
//! host API), and frames only the bundles' signed links (`frame-src` the bundles' path prefix
//! on this origin). `frame-src` applies to every navigation of a frame, so a pane or card that
//! navigates itself outside the bundles is refused by the browser: the reference's "a link or
//! location = … that leads outside the plugin's own signed link is refused", for every place
//! outside `/ui/v1/`. Nothing may frame the console (`frame-ancestors 'none'`), and it keeps
//! no referrer.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// The console's content security policy, with the bundles' URL prefix on this origin
/// (`http://<host>/ui/v1/`, ending in `/`).
pub fn content_security_policy(bundles_url: &str) -> String {
    [
        "default-src 'none'".to_string(),
        "script-src 'self'".to_string(),
        "style-src 'self'".to_string(),
        "img-src 'self' data:".to_string(),
        "font-src 'self'".to_string(),
        "connect-src 'self'".to_string(),
        format!("frame-src {bundles_url}"),
        format!("child-src {bundles_url}"),
        "worker-src 'none'".to_string(),
        "object-src 'none'".to_string(),
        "form-action 'none'".to_string(),
        "base-uri 'none'".to_string(),
        "frame-ancestors 'none'".to_string(),
    ]
    .join("; ")
}

/// Every header of a console file's answer.
pub fn headers(bundles_url: &str, content_type: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut set = |name: HeaderName, value: String| {
        headers.insert(
            name,
            HeaderValue::from_str(&value).expect("built from header-safe parts"),
        );
    };
    set(
        header::CONTENT_SECURITY_POLICY,
        content_security_policy(bundles_url),
    );
    set(header::CONTENT_TYPE, content_type.into());
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff".into());
    set(header::REFERRER_POLICY, "no-referrer".into());
    set(header::X_FRAME_OPTIONS, "DENY".into());
    // The files change with the binary: ask each time (they are small).
    set(header::CACHE_CONTROL, "no-cache".into());
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUNDLES: &str = "http://api.test/ui/v1/";

    fn directive(name: &str) -> String {
        let csp = content_security_policy(BUNDLES);
        csp.split("; ")
            .find(|d| d.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {csp}"))
            .to_string()
    }

    #[test]
    fn scripts_and_styles_are_the_consoles_own_files_only() {
        assert_eq!(directive("script-src"), "script-src 'self'");
        assert_eq!(directive("style-src"), "style-src 'self'");
        assert_eq!(directive("default-src"), "default-src 'none'");
        let csp = content_security_policy(BUNDLES);
        for loose in ["'unsafe-inline'", "'unsafe-eval'", "*", "'strict-dynamic'"] {
            assert!(!csp.contains(loose), "{loose} in {csp}");
        }
    }

    #[test]
    fn frames_are_only_the_bundles_and_fetches_only_this_server() {
        assert_eq!(directive("frame-src"), format!("frame-src {BUNDLES}"));
        assert_eq!(directive("child-src"), format!("child-src {BUNDLES}"));
        assert_eq!(directive("connect-src"), "connect-src 'self'");
        assert_eq!(directive("frame-ancestors"), "frame-ancestors 'none'");
        assert_eq!(directive("form-action"), "form-action 'none'");
        assert_eq!(directive("base-uri"), "base-uri 'none'");
        assert_eq!(directive("object-src"), "object-src 'none'");
    }

    #[test]
    fn every_answer_carries_the_policy_and_its_companions() {
        let h = headers(BUNDLES, "text/html; charset=utf-8");
        assert_eq!(
            h[header::CONTENT_SECURITY_POLICY],
            content_security_policy(BUNDLES)
        );
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(h[header::CONTENT_TYPE], "text/html; charset=utf-8");
    }
}
