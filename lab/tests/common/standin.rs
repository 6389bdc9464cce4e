//! Small stand-ins of a node's HTTP API (drand's v1 `/info`,
//! `/public/{round}`, `/public/latest`, and `/health`) for the client
//! commands' tests: a chain with a key made in the test, whose rounds are
//! served once due, or any fixed answers (drand's published rounds).

use beacon::chain::round_message;
use beacon::{Beacon, BeaconJson, ChainInfo, ChainInfoJson, Point, Scalar, Scheme};
use rand_chacha::rand_core::SeedableRng;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// How a stand-in node answers.
#[derive(Clone, Copy, PartialEq)]
pub enum Behaviour {
    Honest,
    /// Serves round r with round r + 1's signature (randomness consistent).
    Lies,
    /// Serves no round at all (404), as a node that is behind.
    Behind,
}

/// A chain with a key made here and a signer for its rounds.
pub struct Chain {
    pub info: ChainInfo,
    pub sign: Box<dyn Fn(u64) -> Vec<u8> + Send + Sync>,
}

/// A chain of scheme `S` with a key drawn from `seed`.
pub fn chain<S: Scheme>(seed: u64, period: u32, genesis_time: i64) -> Chain {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let secret = Scalar::random(&mut rng);
    Chain {
        info: ChainInfo {
            public_key: S::PublicKey::generator().mul(&secret).to_bytes(),
            period,
            genesis_time,
            genesis_seed: vec![seed as u8; 32],
            scheme: S::ID,
            beacon_id: format!("tle-{seed}"),
        },
        sign: Box::new(move |round| {
            S::hash_message(&round_message(S::ID, round, &[]))
                .mul(&secret)
                .to_bytes()
        }),
    }
}

/// Serves `chain` over HTTP on 127.0.0.1 (until the test process ends);
/// returns its URL.
pub fn serve(chain: Chain, behaviour: Behaviour) -> String {
    let chain = Arc::new(chain);
    serve_paths(move |path| answer(&chain, behaviour, path))
}

/// Serves HTTP on 127.0.0.1 (until the test process ends), answering each
/// GET with `answer(path)`: a status line and a JSON body; returns its URL.
pub fn serve_paths(
    answer: impl Fn(&str) -> (&'static str, String) + Send + Sync + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // Skip the headers.
            let mut h = String::new();
            while reader.read_line(&mut h).is_ok_and(|n| n > 2) {
                h.clear();
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let (status, body) = answer(&path);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

fn answer(chain: &Chain, behaviour: Behaviour, path: &str) -> (&'static str, String) {
    let info = &chain.info;
    let not_found = ("404 Not Found", "not found\n".to_string());
    let latest = if info.period == 0 {
        1_000
    } else {
        info.schedule().rounds_due(i128::from(now()))
    };
    let round = match path {
        "/info" => {
            return (
                "200 OK",
                serde_json::to_string(&ChainInfoJson::from(info)).unwrap(),
            )
        }
        "/health" if behaviour == Behaviour::Behind => {
            return (
                "503 Service Unavailable",
                format!(r#"{{"current":0,"expected":{latest}}}"#),
            )
        }
        "/health" => {
            return (
                "200 OK",
                format!(r#"{{"current":{latest},"expected":{latest}}}"#),
            )
        }
        "/public/latest" => latest,
        p => match p.strip_prefix("/public/").and_then(|r| r.parse().ok()) {
            Some(r) => r,
            None => return not_found,
        },
    };
    if round == 0 || round > latest || behaviour == Behaviour::Behind {
        return not_found;
    }
    let signed = if behaviour == Behaviour::Lies {
        round + 1
    } else {
        round
    };
    let b = Beacon::new(info.scheme, round, (chain.sign)(signed), &[]);
    (
        "200 OK",
        serde_json::to_string(&BeaconJson::from(&b)).unwrap(),
    )
}
