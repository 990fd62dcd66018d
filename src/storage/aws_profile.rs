//! A profile of the AWS shared files, as the AWS tools read them: keys from the credentials
//! file (`AWS_SHARED_CREDENTIALS_FILE`, or `~/.aws/credentials`), the region from the config
//! file (`AWS_CONFIG_FILE`, or `~/.aws/config`, whose sections are `[profile NAME]` except
//! `[default]`). The profile is `AWS_PROFILE`, or `default`.

use std::collections::HashMap;
use std::path::PathBuf;

use object_store::aws::AmazonS3Builder;

use crate::error::SqlError;

#[derive(Debug, Default, PartialEq)]
pub struct AwsProfile {
    access_key_id: Option<String>,
    secret_access_key: Option<String>,
    session_token: Option<String>,
    region: Option<String>,
}

impl AwsProfile {
    /// The profile the environment names, or `None` when neither file has it.
    pub fn load() -> Result<Option<AwsProfile>, SqlError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let file = |variable: &str, default: &str| {
            std::env::var_os(variable)
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
        };
        let read = |path: Option<PathBuf>| -> Result<String, SqlError> {
            match path.map(std::fs::read_to_string) {
                Some(Ok(text)) => Ok(text),
                Some(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(SqlError::storage("could not read the AWS shared files", &e))
                }
                _ => Ok(String::new()),
            }
        };
        let name = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".to_string());
        let credentials = read(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"))?;
        let config = read(file("AWS_CONFIG_FILE", "config"))?;
        Ok(Self::of(&name, &credentials, &config))
    }

    fn of(name: &str, credentials: &str, config: &str) -> Option<AwsProfile> {
        let keys = sections(credentials).remove(name);
        let config_section = if name == "default" { name.to_string() } else { format!("profile {name}") };
        let settings = sections(config).remove(&config_section);
        if keys.is_none() && settings.is_none() {
            return None;
        }
        let (keys, settings) = (keys.unwrap_or_default(), settings.unwrap_or_default());
        let get = |key: &str| keys.get(key).or_else(|| settings.get(key)).cloned();
        Some(AwsProfile {
            access_key_id: get("aws_access_key_id"),
            secret_access_key: get("aws_secret_access_key"),
            session_token: get("aws_session_token"),
            region: settings.get("region").or_else(|| keys.get("region")).cloned(),
        })
    }

    /// The builder with what the profile sets and the environment did not.
    pub fn apply(self, mut builder: AmazonS3Builder) -> AmazonS3Builder {
        if let Some(key) = self.access_key_id {
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = self.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        if let Some(token) = self.session_token {
            builder = builder.with_token(token);
        }
        if let Some(region) = self.region.filter(|_| std::env::var_os("AWS_REGION").is_none()) {
            builder = builder.with_region(region);
        }
        builder
    }
}

/// An INI file's sections: `key = value` lines under `[name]`; `#` and `;` start comments.
fn sections(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut sections: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current = None;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_string();
            sections.entry(name.clone()).or_default();
            current = Some(name);
        } else if let (Some(section), Some((key, value))) = (&current, line.split_once('=')) {
            sections.entry(section.clone()).or_default().insert(key.trim().to_string(), value.trim().to_string());
        }
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREDENTIALS: &str = "[default]\naws_access_key_id = AK1\naws_secret_access_key = S1\n\n\
                               # another\n[lake]\naws_access_key_id=AK2\naws_secret_access_key=S2\naws_session_token=T2\n";
    const CONFIG: &str = "[default]\nregion = eu-west-1\n[profile lake]\nregion = us-east-2\n";

    #[test]
    fn a_named_profile_takes_its_keys_and_its_region() {
        let lake = AwsProfile::of("lake", CREDENTIALS, CONFIG).unwrap();
        assert_eq!(
            lake,
            AwsProfile {
                access_key_id: Some("AK2".into()),
                secret_access_key: Some("S2".into()),
                session_token: Some("T2".into()),
                region: Some("us-east-2".into()),
            }
        );
        let default = AwsProfile::of("default", CREDENTIALS, CONFIG).unwrap();
        assert_eq!((default.access_key_id.as_deref(), default.region.as_deref()), (Some("AK1"), Some("eu-west-1")));
    }

    #[test]
    fn a_profile_in_neither_file_is_none() {
        assert_eq!(AwsProfile::of("missing", CREDENTIALS, CONFIG), None);
        assert_eq!(AwsProfile::of("default", "", ""), None);
    }
}
