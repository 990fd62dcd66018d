//! Spark's datetime patterns (`DateTimeFormatterHelper`: the letters of Java's
//! `DateTimeFormatter` that Spark 3 and later accept) as chrono's format strings, for the
//! functions that take one: `date_format`, `from_unixtime`, `to_date`, `to_timestamp` and
//! `unix_timestamp`.
//!
//! Where we differ: quarters (`Q`), two-letter days of the year (`DD`), zone offsets and other
//! letters chrono has no counterpart for are refused with `0A000`; Spark's refused letters
//! (`u`, `e`, `c`, `w`, `W`, `Y`) are refused as Spark refuses them.

use crate::error::SqlError;

/// `pattern` as a chrono format string.
pub fn chrono_format(pattern: &str) -> Result<String, SqlError> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut format = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // Quoted text, with '' for a quote itself.
            let mut j = i + 1;
            if chars.get(j) == Some(&'\'') {
                format.push('\'');
                i = j + 1;
                continue;
            }
            while j < chars.len() {
                if chars[j] == '\'' {
                    if chars.get(j + 1) == Some(&'\'') {
                        format.push('\'');
                        j += 2;
                        continue;
                    }
                    break;
                }
                push_literal(&mut format, chars[j]);
                j += 1;
            }
            i = j + 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            push_literal(&mut format, c);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        format.push_str(letters(c, run, pattern)?);
        i += run;
    }
    Ok(format)
}

fn push_literal(format: &mut String, c: char) {
    if c == '%' {
        format.push_str("%%");
    } else {
        format.push(c);
    }
}

/// chrono's item for `run` repeats of the pattern letter `letter`.
fn letters(letter: char, run: usize, pattern: &str) -> Result<&'static str, SqlError> {
    Ok(match (letter, run) {
        ('y', 2) => "%y",
        ('y', _) => "%Y",
        ('M' | 'L', 1) => "%-m",
        ('M' | 'L', 2) => "%m",
        ('M' | 'L', 3) => "%b",
        ('M' | 'L', 4) => "%B",
        ('d', 1) => "%-d",
        ('d', 2) => "%d",
        ('D', 1) => "%-j",
        ('D', 3) => "%j",
        ('H', 1) => "%-H",
        ('H', 2) => "%H",
        ('h', 1) => "%-I",
        ('h', 2) => "%I",
        ('m', 1) => "%-M",
        ('m', 2) => "%M",
        ('s', 1) => "%-S",
        ('s', 2) => "%S",
        ('S', 3) => "%3f",
        ('S', 6) => "%6f",
        ('S', 9) => "%9f",
        ('a', 1) => "%p",
        ('E', 1..=3) => "%a",
        ('E', 4) => "%A",
        ('z', 1..=3) => "%Z",
        ('u' | 'e' | 'c' | 'w' | 'W' | 'Y', _) => {
            return Err(SqlError::new(
                "42K0B",
                format!(
                    "[INCONSISTENT_BEHAVIOR_CROSS_VERSION.DATETIME_PATTERN_RECOGNITION] Fail to recognize '{pattern}' pattern in the DateTimeFormatter."
                ),
            ));
        }
        _ => {
            let letters: String = std::iter::repeat_n(letter, run).collect();
            return Err(SqlError::feature_not_supported(format!(
                "the datetime pattern letters '{letters}' of '{pattern}' are not supported"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::chrono_format;

    #[test]
    fn spark_letters_become_chrono_items() {
        assert_eq!(chrono_format("yyyy-MM-dd HH:mm:ss").unwrap(), "%Y-%m-%d %H:%M:%S");
        assert_eq!(chrono_format("MMM d, yyyy").unwrap(), "%b %-d, %Y");
        assert_eq!(chrono_format("EEE hh a").unwrap(), "%a %I %p");
        assert_eq!(chrono_format("yyyy-MM-dd'T'HH:mm:ss.SSS").unwrap(), "%Y-%m-%dT%H:%M:%S.%3f");
        assert_eq!(chrono_format("dd/MM/yy '100%' ''").unwrap(), "%d/%m/%y 100%% '");
    }

    #[test]
    fn letters_spark_refuses_are_refused_as_spark_refuses_them() {
        assert_eq!(chrono_format("u").unwrap_err().code, "42K0B");
        assert_eq!(chrono_format("QQQ").unwrap_err().code, "0A000");
    }
}
