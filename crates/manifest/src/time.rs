//! Timestamps as conditions and statuses record them: RFC 3339 in UTC, to the second.

use jiff::Timestamp;

/// `at` as statuses record it: RFC 3339, UTC, whole seconds.
pub fn rfc3339(at: Timestamp) -> String {
    at.round(jiff::Unit::Second).unwrap_or(at).to_string()
}

/// `at` to the millisecond, always three digits (RFC 3339, UTC): a string whose order is the
/// times' order, for what is told apart within a second (an approval's request).
pub fn rfc3339_millis(at: Timestamp) -> String {
    let at = at.round(jiff::Unit::Millisecond).unwrap_or(at);
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
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
    fn milliseconds_keep_three_digits_so_strings_sort_as_times() {
        let at = |t: &str| rfc3339_millis(t.parse().unwrap());
        assert_eq!(at("2026-01-01T10:00:00Z"), "2026-01-01T10:00:00.000Z");
        assert_eq!(at("2026-01-01T10:00:00.0126Z"), "2026-01-01T10:00:00.013Z");
        let mut times = [
            at("2026-01-01T10:00:00.5Z"),
            at("2026-01-01T10:00:00Z"),
            at("2026-01-01T10:00:00.05Z"),
        ];
        times.sort();
        assert_eq!(
            times,
            [
                "2026-01-01T10:00:00.000Z",
                "2026-01-01T10:00:00.050Z",
                "2026-01-01T10:00:00.500Z"
            ]
        );
        assert_eq!(
            parse(&times[1]),
            Some("2026-01-01T10:00:00.05Z".parse().unwrap())
        );
    }

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
