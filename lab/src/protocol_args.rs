//! The protocol options of the commands that write node configs (`localnet`,
//! `deploy compose`, `compare`): a `[protocol]` table read from a file (a
//! simulator scenario, a `node.toml`, or a file with only that table), with
//! `--c` and `--period` over it. A scenario tuned in the simulator thus runs
//! unchanged on real nodes.

use anyhow::{bail, Context, Result};
use beacon::Period;
use clap::Args;
use consensus::{BeaconShares, ProtocolParams};
use std::path::{Path, PathBuf};

/// `--protocol FILE`, `--c`, `--period` and `--beacon-shares`.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct ProtocolArgs {
    /// Protocol parameters: the `[protocol]` table of this TOML file (a
    /// simulator scenario such as `configs/sim/default.toml`, a `node.toml`, or
    /// a file with only that table). `--c` and `--period` override its values.
    #[arg(long, value_name = "FILE")]
    pub protocol: Option<PathBuf>,
    /// Extra collectors `c` (default: the `--protocol` file's, else the smallest
    /// `c` with `n = 3f + 2c + 1`; other sizes are refused, their quorums are
    /// unsafe).
    #[arg(long)]
    pub c: Option<u32>,
    /// Seconds between rounds (0: back-to-back rounds; default: the `--protocol`
    /// file's period, else 0).
    #[arg(long)]
    pub period: Option<u32>,
    /// Where beacon shares go: `collectors` (on the vote; two message delays
    /// to the beacon) or `everyone` (each replica combines; one delay, about
    /// n^2 more messages). Default: the `--protocol` file's, else everyone on
    /// paced networks of up to 16 nodes, the collectors otherwise.
    #[arg(long, value_name = "TO")]
    pub beacon_shares: Option<BeaconShares>,
}

impl ProtocolArgs {
    /// The `[protocol]` table the nodes of an `n`-node network get: the file's
    /// (or the defaults), with `--c` and `--period` over it and `c` resolved,
    /// checked for `n`.
    pub(crate) fn params(&self, n: u32) -> Result<ProtocolParams> {
        let mut params = match &self.protocol {
            Some(path) => read_table(path)?,
            None => ProtocolParams::default(),
        };
        if let Some(c) = self.c {
            params.c = Some(c);
        }
        if let Some(p) = self.period {
            params.period = Period::from_secs(p);
        }
        if let Some(shares) = self.beacon_shares {
            params.beacon_shares = Some(shares);
        }
        let c = match (&self.protocol, self.c, params.c) {
            (Some(path), None, Some(c)) => params.collector_slack(n).map_err(|e| {
                anyhow::anyhow!(
                    "{e} (c = {c} is the [protocol] table's of {}; override it with --c)",
                    path.display()
                )
            })?,
            _ => params.collector_slack(n)?,
        };
        params.c = Some(c);
        params.period_s()?;
        params.validate()?;
        Ok(params)
    }
}

/// The `[protocol]` table of the TOML file at `path`.
fn read_table(path: &Path) -> Result<ProtocolParams> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let Some(table) = doc.get("protocol") else {
        bail!("{} has no [protocol] table", path.display());
    };
    table
        .clone()
        .try_into()
        .with_context(|| format!("{}: [protocol]", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(file: Option<&Path>, c: Option<u32>, period: Option<u32>) -> ProtocolArgs {
        ProtocolArgs {
            protocol: file.map(Path::to_path_buf),
            c,
            period,
            beacon_shares: None,
        }
    }

    fn scenario(name: &str) -> PathBuf {
        Path::new("../configs/sim").join(format!("{name}.toml"))
    }

    #[test]
    fn defaults_without_a_file() {
        let p = args(None, None, None).params(4).unwrap();
        assert_eq!(p.c, Some(0));
        assert_eq!(p.period, Period::ZERO);
        let p = args(None, None, Some(3)).params(6).unwrap();
        assert_eq!((p.c, p.period.as_millis()), (Some(1), Ok(3_000)));
    }

    #[test]
    fn a_scenarios_table_with_the_command_line_over_it() {
        let file = scenario("default");
        let p = args(Some(&file), None, None).params(4).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let doc: toml::Table = toml::from_str(&text).unwrap();
        let want: ProtocolParams = doc["protocol"].clone().try_into().unwrap();
        assert_eq!(p, ProtocolParams { c: Some(0), ..want });
        let p = args(Some(&file), Some(1), Some(2)).params(6).unwrap();
        assert_eq!((p.c, p.period.as_millis()), (Some(1), Ok(2_000)));
        assert_eq!(p.fast_path_timeout_ms, want.fast_path_timeout_ms);
    }

    #[test]
    fn beacon_shares_from_the_file_or_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("everyone.toml");
        std::fs::write(&file, "[protocol]\nbeacon_shares = \"everyone\"\n").unwrap();
        let p = args(Some(&file), None, None).params(4).unwrap();
        assert_eq!(p.beacon_shares, Some(BeaconShares::Everyone));
        let mut over = args(Some(&file), None, None);
        over.beacon_shares = Some("collectors".parse().unwrap());
        assert_eq!(
            over.params(4).unwrap().beacon_shares,
            Some(BeaconShares::Collectors)
        );
        assert_eq!(
            args(None, None, None).params(4).unwrap().beacon_shares,
            None
        );
        let e = "all".parse::<BeaconShares>().unwrap_err().to_string();
        assert_eq!(
            e,
            "\"all\" is not a beacon-share route: collectors or everyone"
        );
        std::fs::write(&file, "[protocol]\nbeacon_shares = \"all\"\n").unwrap();
        let e = format!("{:#}", args(Some(&file), None, None).params(4).unwrap_err());
        assert!(e.contains("beacon_shares") || e.contains("everyone"), "{e}");
    }

    #[test]
    fn bad_files_are_named_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.toml");
        let e = format!(
            "{:#}",
            args(Some(&missing), None, None).params(4).unwrap_err()
        );
        assert!(e.contains("none.toml"), "{e}");
        let no_table = dir.path().join("no-table.toml");
        std::fs::write(&no_table, "[network]\nid = \"x\"\n").unwrap();
        let e = format!(
            "{:#}",
            args(Some(&no_table), None, None).params(4).unwrap_err()
        );
        assert!(e.contains("no [protocol] table"), "{e}");
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "[protocol]\nmax_batch = 0\n").unwrap();
        let e = format!("{:#}", args(Some(&bad), None, None).params(4).unwrap_err());
        assert!(e.contains("max_batch"), "{e}");
        std::fs::write(&bad, "[protocol]\nbogus = 1\n").unwrap();
        let e = format!("{:#}", args(Some(&bad), None, None).params(4).unwrap_err());
        assert!(e.contains("bogus"), "{e}");
        // The file's c fits 4 nodes, not 6: the error says how to override it.
        let e = format!(
            "{:#}",
            args(Some(&scenario("default")), None, None)
                .params(6)
                .unwrap_err()
        );
        assert!(e.contains("--c"), "{e}");
        std::fs::write(&bad, "[protocol]\nperiod_ms = 1500\n").unwrap();
        let e = format!("{:#}", args(Some(&bad), None, None).params(4).unwrap_err());
        assert!(e.contains("period_ms"), "{e}");
    }
}
