//! The proxies in front whose forwarding headers are believed: address ranges from the flag or
//! the file, parsed by `ipnet`.

use ipnet::IpNet;
use toml::Spanned;

use super::ConfigError;
use crate::cli::Cli;

/// The flag's ranges, else the file's; none by default.
pub(super) fn trusted_proxies(
    cli: &Cli,
    file: Option<&Spanned<Vec<String>>>,
    where_: &dyn Fn(std::ops::Range<usize>) -> String,
) -> Result<Vec<IpNet>, ConfigError> {
    if !cli.trusted_proxies.is_empty() {
        return cli
            .trusted_proxies
            .iter()
            .map(|text| range(text))
            .collect::<Result<_, _>>()
            .map_err(|m| ConfigError(format!("--trusted-proxies: {m}")));
    }
    let Some(listed) = file else {
        return Ok(Vec::new());
    };
    listed
        .get_ref()
        .iter()
        .map(|text| range(text))
        .collect::<Result<_, _>>()
        .map_err(|m| ConfigError(format!("{}: trusted_proxies: {m}", where_(listed.span()))))
}

/// A CIDR (`10.0.0.0/8`, `fd00::/8`), or one address, which is the range of that address alone.
fn range(text: &str) -> Result<IpNet, String> {
    let text = text.trim();
    text.parse::<IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(IpNet::from))
        .map(|net| net.trunc())
        .map_err(|_| {
            format!(
                "`{text}` is not an address range: expected a CIDR like 10.0.0.0/8 or \
                 fd00::/8, or one address like 127.0.0.1"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn a_range_is_a_cidr_or_one_address() {
        assert_eq!(range("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(range(" 127.0.0.1 ").unwrap().to_string(), "127.0.0.1/32");
        assert_eq!(range("::1").unwrap().to_string(), "::1/128");
        for bad in ["10.0.0.0/33", "office", "10.0.0/8", ""] {
            let message = range(bad).unwrap_err();
            assert!(message.contains(&format!("`{bad}`")), "{message}");
            assert!(message.contains("10.0.0.0/8"), "{message}");
        }
    }
}
