//! The pages' frame and the small pieces every page uses: escaping, figures, times.

use std::fmt::Write;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { background: #2c3e50; color: #fff; padding: 8px 16px; display: flex; gap: 24px; align-items: baseline; }
header a { color: #fff; text-decoration: none; }
header .brand { font-weight: bold; font-size: 16px; }
main { padding: 12px 16px; }
table.list { border-collapse: collapse; margin: 8px 0; }
table.list th, table.list td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
table.list th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.sql, pre { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; word-break: break-all; }
td.sql { max-width: 60em; }
.state-running { color: #1565c0; font-weight: bold; }
.state-failed { color: #c62828; font-weight: bold; }
.state-abandoned { color: #8d6e63; }
.override { background: #fff3cd; }
.legend span { display: inline-block; padding: 1px 6px; margin-right: 6px; border: 2px solid; }
ul.notes li { margin: 2px 0; }
svg { background: #fff; }
button { font: inherit; }
";

/// A whole page: the navigation, `title` and `body`. `refresh`: reload every second (a
/// running statement's figures).
pub fn page(title: &str, body: &str, refresh: bool) -> Html<String> {
    let refresh = if refresh { "<meta http-equiv=\"refresh\" content=\"1\">" } else { "" };
    Html(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}<title>{} · bucketsql</title>\
         <style>{STYLE}</style></head><body><header><span class=\"brand\">bucketsql</span>\
         <a href=\"/queries\">Queries</a><a href=\"/statements\">Statements</a><a href=\"/tables\">Tables</a>\
         <a href=\"/connections\">Connections</a>\
         </header><main><h1>{}</h1>{body}</main></body></html>",
        escape(title),
        escape(title)
    ))
}

pub fn error_page(status: StatusCode, message: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("Error");
    (status, page(&format!("{} {title}", status.as_u16()), &format!("<p>{}</p>", escape(message)), false))
        .into_response()
}

/// An answer to a request for something that is not there, or not the viewer's to see.
pub fn not_found() -> Response {
    error_page(StatusCode::NOT_FOUND, "There is no such page.")
}

/// `text` safe inside HTML and SVG, in text and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `1234567` as `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units, as Spark's UI shows sizes.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

pub fn duration(d: Duration) -> String {
    let millis = d.as_secs_f64() * 1000.0;
    if millis < 1000.0 { format!("{millis:.1} ms") } else { format!("{:.2} s", millis / 1000.0) }
}

/// A table: its header cells and rows of cells already rendered.
pub fn table(headers: &[&str], rows: impl IntoIterator<Item = String>) -> String {
    let mut out = String::from("<table class=\"list\"><thead><tr>");
    for h in headers {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        let _ = write!(out, "<tr>{row}</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(16 * 1024 * 1024 + 200 * 1024), "16.2 MiB");
        assert_eq!(escape("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
    }
}
