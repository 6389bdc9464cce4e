//! What `tle` reads from a node's HTTP API: its base URL, the chain info,
//! and the runtime and client it uses to read them.

use super::lock::parse_info;
use super::HTTP_TIMEOUT;
use anyhow::{bail, Context, Result};
use beacon::ChainInfo;

pub(super) fn base_url(url: &str) -> Result<String> {
    let base = url.trim_end_matches('/').to_string();
    if base.starts_with("https://") {
        bail!(
            "{url}: https is not supported by this build (our nodes serve plain HTTP); \
             use an http:// URL"
        );
    }
    if base.starts_with("http://") {
        Ok(base)
    } else if !base.contains("://") && !base.is_empty() {
        Ok(format!("http://{base}")) // `127.0.0.1:8000`
    } else {
        bail!("{url:?} is not an http:// URL")
    }
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the HTTP runtime")
}

pub(super) fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .context("HTTP client")
}

pub(super) async fn fetch_info(client: &reqwest::Client, base: &str) -> Result<ChainInfo> {
    let url = format!("{base}/info");
    let value = node::http::get_json(client, &url)
        .await
        .with_context(|| format!("no chain info from {base}: is a node's HTTP API there?"))?;
    parse_info(value, &url)
}
