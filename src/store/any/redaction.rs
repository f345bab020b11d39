//! Store URLs as they may be shown: every password in them replaced by `***`, wherever one is
//! printed (a refused URL, a store that cannot be reached, a log line).
//!
//! Hand-written rather than parsed by `url`: a URL that is refused is one a parser may not
//! take (`postgresql+asyncpg://`, a password with a raw `@` or space), and its password must
//! still not be shown.

/// What a password is shown as.
const HIDDEN: &str = "***";

/// `text` with the password of every store URL or connection string in it replaced by `***`:
/// a URL's (`scheme://user:***@host`, and `password=***` in its query) and a libpq
/// `key=value` string's (`password=***`, quoted or not, `sslpassword` too). Text with no
/// password comes back as it was.
///
/// [`AnyStore`](super::AnyStore)'s errors are shown this way already; this is for text that
/// may hold a store URL from elsewhere (a configuration file's line, a log message).
///
/// ```
/// use tower_idempotency::store::redacted;
///
/// assert_eq!(redacted("redis://app:secret@10.0.0.5:6379"), "redis://app:***@10.0.0.5:6379");
/// ```
pub fn redacted(text: &str) -> String {
    key_value_passwords(&url_passwords(text))
}

/// `scheme://user:password@host`: the user info ends at the URL's last `@`, so a password
/// may hold `@`, `:`, `/` or spaces.
fn url_passwords(text: &str) -> String {
    let starts: Vec<usize> = text.match_indices("://").map(|(at, _)| at + 3).collect();
    let mut shown = String::with_capacity(text.len());
    let mut copied = 0;
    for (n, &start) in starts.iter().enumerate() {
        // Up to the next URL's `://`, which its scheme stands before.
        let end = starts.get(n + 1).map_or(text.len(), |next| next - 3);
        let rest = &text[start..end];
        // The last `@`: one in a query (`?user=a@b`) hides more than the password, never less.
        let Some(at) = rest.rfind('@') else {
            continue;
        };
        let Some(colon) = rest[..at].find(':') else {
            continue;
        };
        shown.push_str(&text[copied..start + colon + 1]);
        shown.push_str(HIDDEN);
        copied = start + at;
    }
    shown.push_str(&text[copied..]);
    shown
}

/// `password=value` (libpq: spaces around `=`, a value in single quotes with `\` escapes,
/// else up to a space; in a URL's query, up to `&` or `#`).
fn key_value_passwords(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut shown = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = lower[from..].find("password") {
        let key_end = from + found + "password".len();
        from = key_end;
        let after_key = text[key_end..].trim_start();
        let Some(after_equals) = after_key.strip_prefix('=') else {
            continue;
        };
        let value = after_equals.trim_start();
        let value_start = text.len() - value.len();
        let key_start = text[..key_end - "password".len()]
            .trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_')
            .len();
        let in_query = text[..key_start].ends_with(['?', '&']);
        let value_len = if value.starts_with('\'') {
            quoted_len(value)
        } else if in_query {
            value
                .find(['&', '#', ' ', '\t', '\n'])
                .unwrap_or(value.len())
        } else {
            value.find(char::is_whitespace).unwrap_or(value.len())
        };
        shown.push_str(&text[copied..value_start]);
        shown.push_str(HIDDEN);
        copied = value_start + value_len;
        from = copied.max(from);
    }
    shown.push_str(&text[copied..]);
    shown
}

/// The length of a single-quoted libpq value, its quotes included; to the end if unclosed.
fn quoted_len(value: &str) -> usize {
    let mut escaped = false;
    for (at, c) in value.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '\'' => return at + 1,
            _ => {}
        }
    }
    value.len()
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn a_urls_password_is_hidden_and_its_user_and_host_kept() {
        let cases = [
            (
                "postgresql+asyncpg://app:secret@db.internal/app",
                "postgresql+asyncpg://app:***@db.internal/app",
            ),
            (
                "postgres://app:p@ss:w/rd@db:5432/app?sslmode=require",
                "postgres://app:***@db:5432/app?sslmode=require",
            ),
            ("postgres://app:a b c@db/app", "postgres://app:***@db/app"),
            (
                "redis://:secret@10.0.0.5:6379",
                "redis://:***@10.0.0.5:6379",
            ),
            (
                "redis://user:secret@10.0.0.5:6379/0",
                "redis://user:***@10.0.0.5:6379/0",
            ),
            (
                "postgres://db/app?user=app&password=secret&sslmode=require",
                "postgres://db/app?user=app&password=***&sslmode=require",
            ),
        ];
        for (url, shown) in cases {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }

    #[test]
    fn a_libpq_strings_password_is_hidden_quoted_or_not() {
        let cases = [
            (
                "host=db password=secret dbname=app",
                "host=db password=*** dbname=app",
            ),
            (
                "host=db password='a b@c:d\\'e' dbname=app",
                "host=db password=*** dbname=app",
            ),
            ("password = 'x\"y' host=db", "password = *** host=db"),
            ("host=db PASSWORD=secret", "host=db PASSWORD=***"),
            ("sslpassword=secret host=db", "sslpassword=*** host=db"),
            ("host=db password='never closed", "host=db password=***"),
        ];
        for (text, shown) in cases {
            assert_eq!(redacted(text), shown, "{text}");
        }
    }

    #[test]
    fn every_url_in_a_list_or_a_message_is_hidden_and_text_without_one_kept() {
        assert_eq!(
            redacted("`redis://:a@h1:7000,redis://:b@h2:7001` is refused"),
            "`redis://:***@h1:7000,redis://:***@h2:7001` is refused"
        );
        assert_eq!(
            redacted("2 | postgress_url = \"postgres://app:secret@db/app\"\n  | ^"),
            "2 | postgress_url = \"postgres://app:***@db/app\"\n  | ^"
        );
        for kept in [
            "redis://10.0.0.5:6379",
            "postgres://app@127.0.0.1:5432/app",
            "host=db user=app dbname=app",
            "password authentication failed for user \"app\"",
        ] {
            assert_eq!(redacted(kept), kept);
        }
        // Shown once, shown the same again.
        let once = redacted("postgres://app:secret@db/app password=x");
        assert_eq!(redacted(&once), once);
    }
}
