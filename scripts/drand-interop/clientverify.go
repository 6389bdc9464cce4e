package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	nhttp "net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drand/drand/v2/common/chain"
	"github.com/drand/drand/v2/crypto"
	"github.com/drand/go-clients/client"
	dhttp "github.com/drand/go-clients/client/http"
	"github.com/drand/go-clients/drand"
)

// verifySummary is client-verify's one line of output.
type verifySummary struct {
	ChainHash      string `json:"chain_hash"`
	Scheme         string `json:"scheme"`
	BeaconID       string `json:"beacon_id"`
	Period         uint64 `json:"period"`
	VerifiedRounds uint64 `json:"verified_rounds"`
	Latest         uint64 `json:"latest"`
	Requests       int    `json:"requests"`
}

func cmdClientVerify(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("client-verify", stderr)
	url := fs.String("url", "", "base URL of a node's drand v1 API (required)")
	chainHash := fs.String("chain-hash", "", "expected chain hash, hex (default: trust {url}/info)")
	rounds := fs.Uint64("rounds", 0, "verify rounds 1..N (required, >= 1)")
	wait := fs.Duration("wait", 0, "first wait up to this long for {url}/public/latest to reach --rounds")
	timeout := fs.Duration("timeout", 2*time.Minute, "overall time limit")
	verbose := fs.Bool("v", false, "log every HTTP request and drand's info logs to stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url == "" || *rounds == 0 {
		return fmt.Errorf("%w: --url and --rounds N (N >= 1) are required", errUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+*wait)
	defer cancel()
	sum, err := clientVerify(ctx, *url, *chainHash, *rounds, *wait, stderr, *verbose)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(sum)
	fmt.Fprintln(stdout, string(line))
	return nil
}

// recorder is an http.RoundTripper that keeps every URL requested and the
// body of every 200 answer to a /public/ path, so the raw JSON that drand's
// client saw can be checked too.
type recorder struct {
	base    nhttp.RoundTripper
	log     io.Writer // nil: quiet
	mu      sync.Mutex
	urls    []string
	beacons [][]byte
}

func (r *recorder) RoundTrip(req *nhttp.Request) (*nhttp.Response, error) {
	resp, err := r.base.RoundTrip(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.urls = append(r.urls, req.URL.String())
	if err != nil {
		if r.log != nil {
			fmt.Fprintf(r.log, "GET %s -> %v\n", req.URL, err)
		}
		return nil, err
	}
	if r.log != nil {
		fmt.Fprintf(r.log, "GET %s -> %d\n", req.URL, resp.StatusCode)
	}
	if resp.StatusCode == nhttp.StatusOK && strings.Contains(req.URL.Path, "/public/") {
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		r.beacons = append(r.beacons, body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, nil
}

// clientVerify is the whole of client-verify.
//
// Trust: the root of trust is the chain hash (--chain-hash, or the hash of
// {url}/info as served when none is given). go-clients' HTTP client then GETs
// {url}/{hash}/info and refuses chain info whose drand-computed hash differs,
// and every beacon it returns has been verified by client.Wrap's verifying
// client against that chain's public key with drand's scheme code. Rounds
// 1..N are fetched with WithFullChainVerification: for chained schemes the
// previous signature is not taken from the server but from the verified
// previous round (the genesis seed, groupHash, for round 1), so the whole
// chain from genesis is verified. The latest round is verified as drand's
// default client does (signature against the group key; for chained schemes
// over the server's previous_signature), so that a long chain is not walked
// again. On top of that, the raw JSON of every beacon served is checked:
// randomness = SHA-256(signature), previous_signature = the previous round's
// signature (groupHash for round 1) on chained schemes and absent otherwise.
func clientVerify(ctx context.Context, url, chainHashHex string, rounds uint64, wait time.Duration,
	stderr io.Writer, verbose bool) (*verifySummary, error) {
	base := trimURL(url)
	l := drandLogger(stderr, verbose)
	rec := &recorder{base: nhttp.DefaultTransport}
	if verbose {
		rec.log = stderr
	}

	var hash []byte
	if chainHashHex != "" {
		var err error
		hash, err = hex.DecodeString(chainHashHex)
		if err != nil || len(hash) != sha256.Size {
			return nil, fmt.Errorf("%w: --chain-hash %q is not 32 bytes of hex", errUsage, chainHashHex)
		}
	} else {
		if verbose {
			fmt.Fprintf(stderr, "GET %s/info (no --chain-hash: its hash is the root of trust)\n", base)
		}
		info, err := fetchChainInfo(ctx, base)
		if err != nil {
			return nil, err
		}
		hash = info.Hash()
	}

	if wait > 0 {
		if err := waitForRound(ctx, base, rounds, wait); err != nil {
			return nil, err
		}
	}

	// go-clients' HTTP client: GETs {url}/{hash}/info now, and
	// {url}/{hash}/public/{round} or {url}/{hash}/public/latest per Get.
	hc, err := dhttp.New(ctx, l, base, hash, rec)
	if err != nil {
		return nil, fmt.Errorf("drand HTTP client: %w", err)
	}
	full, err := client.Wrap([]drand.Client{hc},
		client.WithChainHash(hash),
		client.WithFullChainVerification(),
		client.WithLogger(l),
		client.WithSetupCtx(ctx),
		client.WithCacheSize(64),
	)
	if err != nil {
		hc.Close()
		return nil, fmt.Errorf("drand client.Wrap: %w", err)
	}
	defer full.Close()

	info, err := full.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("chain info: %w", err)
	}
	if !bytes.Equal(info.Hash(), hash) {
		return nil, fmt.Errorf("client's chain hash %x is not %x", info.Hash(), hash)
	}
	if _, err := crypto.GetSchemeByID(info.Scheme); err != nil {
		return nil, fmt.Errorf("scheme %q: %w", info.Scheme, err)
	}

	for r := uint64(1); r <= rounds; r++ {
		res, err := full.Get(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("round %d: drand's verifying client refused it: %w", r, err)
		}
		if res.GetRound() != r {
			return nil, fmt.Errorf("asked for round %d, got round %d", r, res.GetRound())
		}
	}

	// The latest round, verified the way drand's default client does.
	hc2, err := dhttp.NewWithInfo(l, base, info, rec)
	if err != nil {
		return nil, fmt.Errorf("drand HTTP client: %w", err)
	}
	plain, err := client.Wrap([]drand.Client{hc2},
		client.WithChainInfo(info),
		client.WithLogger(l),
		client.WithSetupCtx(ctx),
	)
	if err != nil {
		hc2.Close()
		return nil, fmt.Errorf("drand client.Wrap: %w", err)
	}
	defer plain.Close()
	latest, err := plain.Get(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("latest: drand's verifying client refused it: %w", err)
	}
	if latest.GetRound() < rounds {
		return nil, fmt.Errorf("latest round %d is below round %d, which was served", latest.GetRound(), rounds)
	}

	rec.mu.Lock()
	raw := append([][]byte(nil), rec.beacons...)
	nreq := len(rec.urls)
	rec.mu.Unlock()
	if err := checkRawBeacons(info, raw); err != nil {
		return nil, err
	}

	return &verifySummary{
		ChainHash:      info.HashString(),
		Scheme:         info.Scheme,
		BeaconID:       info.ID,
		Period:         uint64(info.Period.Seconds()),
		VerifiedRounds: rounds,
		Latest:         latest.GetRound(),
		Requests:       nreq,
	}, nil
}

// waitForRound polls {base}/public/latest until its round reaches target.
func waitForRound(ctx context.Context, base string, target uint64, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	var last error
	for {
		body, err := httpGet(ctx, base+"/public/latest")
		if err == nil {
			var b beaconJSON
			if err = json.Unmarshal(body, &b); err == nil && b.Round >= target {
				return nil
			} else if err == nil {
				err = fmt.Errorf("latest round is %d", b.Round)
			}
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %v for round %d: %v", wait, target, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkRawBeacons checks the JSON of the beacons the node served, beyond what
// drand's client checks.
func checkRawBeacons(info *chain.Info, bodies [][]byte) error {
	if len(bodies) == 0 {
		return errors.New("no beacon was served")
	}
	chained := info.Scheme == crypto.DefaultSchemeID
	byRound := map[uint64]*decoded{}
	for _, body := range bodies {
		d, err := decodeBeacon(body)
		if err != nil {
			return fmt.Errorf("raw check: %w", err)
		}
		if prev, ok := byRound[d.round]; ok && !bytes.Equal(prev.signature, d.signature) {
			return fmt.Errorf("raw check: round %d served with two different signatures", d.round)
		}
		byRound[d.round] = d
	}
	rs := make([]uint64, 0, len(byRound))
	for r := range byRound {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
	for _, r := range rs {
		d := byRound[r]
		if !chained {
			if len(d.previous) != 0 {
				return fmt.Errorf("raw check: round %d of unchained scheme %s has a previous_signature (drand omits it)", r, info.Scheme)
			}
			continue
		}
		var want []byte
		switch {
		case r == 1:
			want = info.GenesisSeed
		case byRound[r-1] != nil:
			want = byRound[r-1].signature
		default:
			continue
		}
		if !bytes.Equal(d.previous, want) {
			return fmt.Errorf("raw check: round %d: previous_signature %x is not %x (round %d's signature, or groupHash for round 1)",
				r, d.previous, want, r-1)
		}
	}
	return nil
}
