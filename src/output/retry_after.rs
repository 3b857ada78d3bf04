//! The wait a receiver's `Retry-After` header asks for (RFC 9110, section
//! 10.2.3): delta-seconds (`120`) or an HTTP-date in the IMF-fixdate form
//! every HTTP/1.1 server sends (`Sun, 06 Nov 1994 08:49:37 GMT`). The two
//! obsolete date forms (RFC 850 and asctime) are not read: they give
//! `None`, as a header that cannot be read at all does, and the caller
//! falls back to its own back-off.
//!
//! Pure: the caller passes the time now, in Unix seconds, from its clock.

use std::time::Duration;

use hyper::header::{HeaderMap, RETRY_AFTER};

/// The wait the first `Retry-After` header of `headers` asks for, at most
/// `max`. A date in the past (or now) gives `Some(Duration::ZERO)`: the
/// receiver's wait is over, so the caller may send right away. `None`: no
/// header, or one that is neither delta-seconds nor an IMF-fixdate.
#[must_use]
pub fn retry_after(headers: &HeaderMap, now_unix_secs: u64, max: Duration) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let wait = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: a number too large for u64 is a very long wait.
        Duration::from_secs(text.parse::<u64>().unwrap_or(u64::MAX))
    } else {
        let at = imf_fixdate(text)?;
        let now = i64::try_from(now_unix_secs).unwrap_or(i64::MAX);
        Duration::from_secs(u64::try_from(at.saturating_sub(now)).unwrap_or(0))
    };
    Some(wait.min(max))
}

const DAYS: [&[u8; 3]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// The Unix time (seconds, negative before 1970) of an IMF-fixdate such as
/// `Sun, 06 Nov 1994 08:49:37 GMT`; `None` for anything else. The day name
/// must be one, but is not checked against the date (RFC 9110 lets a
/// recipient ignore it).
fn imf_fixdate(text: &str) -> Option<i64> {
    let b: &[u8; 29] = text.as_bytes().try_into().ok()?;
    let fixed = [(3, b','), (4, b' '), (7, b' '), (11, b' '), (16, b' ')];
    let fixed_ok = fixed.iter().all(|&(i, c)| b[i] == c)
        && b[19] == b':'
        && b[22] == b':'
        && &b[25..] == b" GMT";
    if !fixed_ok || !DAYS.iter().any(|d| d[..] == b[0..3]) {
        return None;
    }
    let month = MONTHS.iter().position(|m| m[..] == b[8..11])?;
    let day = digits(&b[5..7])?;
    let year = digits(&b[12..16])?;
    let (hour, minute, second) = (
        digits(&b[17..19])?,
        digits(&b[20..22])?,
        digits(&b[23..25])?,
    );
    // 60: a leap second, as the grammar allows.
    if day == 0 || day > days_in_month(year, month) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// The number that ASCII digits `d` spell; `None` if one is not a digit.
fn digits(d: &[u8]) -> Option<i64> {
    d.iter().try_fold(0i64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
    })
}

fn days_in_month(year: i64, month: usize) -> i64 {
    const LENGTHS: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    if month == 1 && leap {
        29
    } else {
        LENGTHS[month]
    }
}

/// Days from 1970-01-01 to `year`-`month0 + 1`-`day` in the proleptic
/// Gregorian calendar (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month0: usize, day: i64) -> i64 {
    let month = i64::try_from(month0).unwrap_or(0) + 1;
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    const MAX: Duration = Duration::from_secs(600);

    fn wait(value: &str, now: u64) -> Option<Duration> {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        retry_after(&h, now, MAX)
    }

    #[test]
    fn delta_seconds_are_read_and_capped() {
        assert_eq!(wait("120", 0), Some(Duration::from_secs(120)));
        assert_eq!(wait("0", 0), Some(Duration::ZERO));
        assert_eq!(wait(" 7 ", 0), Some(Duration::from_secs(7)));
        assert_eq!(wait("3600", 0), Some(MAX));
        assert_eq!(wait("99999999999999999999999", 0), Some(MAX));
    }

    #[test]
    fn a_date_is_read_against_now() {
        // 1994-11-06T08:49:37Z is 784111777.
        assert_eq!(
            imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        let now = 784_111_777 - 30;
        assert_eq!(
            wait("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::from_secs(30))
        );
        // In the past, or now: the wait is over.
        assert_eq!(
            wait("Sun, 06 Nov 1994 08:49:37 GMT", now + 3_600),
            Some(Duration::ZERO)
        );
        assert_eq!(
            wait("Thu, 01 Jan 1970 00:00:00 GMT", 784_111_777),
            Some(Duration::ZERO)
        );
        // Far ahead: capped.
        assert_eq!(wait("Fri, 31 Dec 9999 23:59:59 GMT", now), Some(MAX));
    }

    #[test]
    fn dates_across_the_calendar() {
        assert_eq!(imf_fixdate("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(imf_fixdate("Wed, 31 Dec 1969 23:59:59 GMT"), Some(-1));
        // 2000 is a leap year, 1900 not.
        assert_eq!(
            imf_fixdate("Tue, 29 Feb 2000 00:00:00 GMT"),
            Some(951_782_400)
        );
        assert_eq!(imf_fixdate("Thu, 29 Feb 1900 00:00:00 GMT"), None);
        assert_eq!(imf_fixdate("Sat, 29 Feb 2025 00:00:00 GMT"), None);
        assert_eq!(
            imf_fixdate("Wed, 02 Dec 2026 15:33:00 GMT"),
            Some(1_796_225_580)
        );
    }

    #[test]
    fn anything_else_is_none() {
        for bad in [
            "",
            "soon",
            "-5",
            "1.5",
            "12 s",
            // Obsolete forms.
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            // Near misses of the fixed form.
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:3a GMT",
            "Sun, 06 Nov 1994 08:49:37 GMTé",
        ] {
            assert_eq!(wait(bad, 1_000), None, "{bad:?}");
        }
        assert_eq!(retry_after(&HeaderMap::new(), 0, MAX), None);
        // Bytes that are not ASCII do not panic.
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_bytes(b"\xff\xfe1").unwrap());
        assert_eq!(retry_after(&h, 0, MAX), None);
        assert_eq!(imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMé"), None);
    }
}
