//! Spark Connect's connection string, as its clients read it:
//! `sc://host[:port][/;param=value;…]`, the port 15002 unless given. The parameters are
//! `token` (sent as a bearer token, and which turns TLS on, as Spark's clients do),
//! `use_ssl`, `user_id` and `user_agent`; others are refused rather than ignored.

use std::fmt;

use crate::error::SqlError;

pub const DEFAULT_PORT: u16 = 15002;

#[derive(Clone, PartialEq, Eq)]
pub struct SparkConnectUrl {
    pub host: String,
    pub port: u16,
    pub token: Option<String>,
    pub use_ssl: bool,
    pub user_id: Option<String>,
    pub user_agent: Option<String>,
}

impl SparkConnectUrl {
    pub fn parse(text: &str) -> Result<Self, SqlError> {
        let invalid = |why: &str| SqlError::invalid_parameter(format!("invalid Spark Connect URL {text:?}: {why}"));
        let rest = text.strip_prefix("sc://").ok_or_else(|| invalid("it must begin with sc://"))?;
        let (authority, params) = match rest.split_once('/') {
            Some((authority, params)) => (authority, params),
            None => (rest, ""),
        };
        // A colon past the last `]` begins the port (`[::1]:15002`), not one inside an IPv6 address.
        let (host, port) = match authority.rfind(':') {
            Some(colon) if !authority[colon..].contains(']') => (
                &authority[..colon],
                authority[colon + 1..]
                    .parse::<u16>()
                    .map_err(|_| invalid("the port is not a number from 0 to 65535"))?,
            ),
            _ => (authority, DEFAULT_PORT),
        };
        if host.is_empty() {
            return Err(invalid("it names no host"));
        }
        let mut url = SparkConnectUrl {
            host: host.to_string(),
            port,
            token: None,
            use_ssl: false,
            user_id: None,
            user_agent: None,
        };
        for param in params.split(';').filter(|p| !p.is_empty()) {
            let (key, value) = param.split_once('=').ok_or_else(|| invalid("a parameter is not key=value"))?;
            match key {
                "token" => url.token = Some(value.to_string()),
                "use_ssl" => {
                    url.use_ssl = match value {
                        "true" => true,
                        "false" => false,
                        _ => return Err(invalid("use_ssl is true or false")),
                    }
                }
                "user_id" => url.user_id = Some(value.to_string()),
                "user_agent" => url.user_agent = Some(value.to_string()),
                other => return Err(invalid(&format!("unknown parameter {other}"))),
            }
        }
        if url.token.is_some() {
            url.use_ssl = true;
        }
        Ok(url)
    }

    /// The HTTP/2 endpoint gRPC calls go to.
    pub fn endpoint(&self) -> String {
        let scheme = if self.use_ssl { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.host, self.port)
    }
}

/// The URL without its token, as errors and EXPLAIN show it.
impl fmt::Display for SparkConnectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sc://{}:{}", self.host, self.port)
    }
}

impl fmt::Debug for SparkConnectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_host_port_and_parameters() {
        let url = SparkConnectUrl::parse("sc://spark.example:443/;token=abc;user_id=ana").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("spark.example", 443));
        assert_eq!(url.token.as_deref(), Some("abc"));
        assert!(url.use_ssl, "a token turns TLS on");
        assert_eq!(url.user_id.as_deref(), Some("ana"));
        assert_eq!(url.endpoint(), "https://spark.example:443");
        assert_eq!(url.to_string(), "sc://spark.example:443", "the token is never shown");
    }

    #[test]
    fn defaults_to_port_15002_without_tls() {
        let url = SparkConnectUrl::parse("sc://127.0.0.1").unwrap();
        assert_eq!(url.port, DEFAULT_PORT);
        assert_eq!(url.endpoint(), "http://127.0.0.1:15002");
        let v6 = SparkConnectUrl::parse("sc://[::1]:15003").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("[::1]", 15003));
        assert_eq!(SparkConnectUrl::parse("sc://[::1]").unwrap().port, DEFAULT_PORT);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for bad in ["http://x:1", "sc://", "sc://x:port", "sc://x:1/;color=red", "sc://x/;use_ssl=yes", "sc://x/;a"] {
            let error = SparkConnectUrl::parse(bad).unwrap_err();
            assert_eq!(error.code, "22023", "{bad}");
        }
    }
}
