//! Timestamps as conditions and statuses record them: RFC 3339 in UTC, to the second.

use jiff::Timestamp;

/// `at` as statuses record it: RFC 3339, UTC, whole seconds.
pub fn rfc3339(at: Timestamp) -> String {
    at.round(jiff::Unit::Second).unwrap_or(at).to_string()
}

/// The time now, as conditions record it.
pub fn now_rfc3339() -> String {
    rfc3339(Timestamp::now())
}

/// A recorded timestamp, when it parses.
pub fn parse(text: &str) -> Option<Timestamp> {
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_whole_seconds_in_utc() {
        let at: Timestamp = "2026-01-01T10:00:00.600Z".parse().unwrap();
        assert_eq!(rfc3339(at), "2026-01-01T10:00:01Z");
        assert_eq!(
            parse("2026-01-01T10:00:01Z"),
            Some("2026-01-01T10:00:01Z".parse().unwrap())
        );
        assert_eq!(parse("yesterday"), None);
    }
}
