//! What `tle` reads from a node's HTTP API: the chain info (the client, its
//! URLs and TLS are [`node_cli::http_client`]'s).

use super::lock::parse_info;
use anyhow::Result;
use beacon::ChainInfo;
use node_cli::http_client::{failed_in_tls, ApiClient};

pub(super) async fn fetch_info(client: &ApiClient, base: &str) -> Result<ChainInfo> {
    let url = format!("{base}/info");
    let value = match client.get_json(&url).await {
        Ok(value) => value,
        // A refused certificate says so itself, first.
        Err(e) if failed_in_tls(&e) => return Err(e),
        Err(e) => {
            return Err(e.context(format!(
                "no chain info from {base}: is a node's HTTP API there?"
            )))
        }
    };
    parse_info(value, &url)
}
