package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	nhttp "net/http"
	"strings"
	"time"

	"github.com/drand/drand/v2/common/chain"
)

// parseChainInfo parses drand's v1 chain info JSON
// ({"public_key","period","genesis_time","hash","groupHash","schemeID",
// "metadata":{"beaconID"}}) with drand's own parser (chain.InfoFromJSON, the
// one go-clients' HTTP client uses), and checks that the advertised "hash" is
// the chain hash drand computes from the other fields (drand's parser does
// not check it).
func parseChainInfo(body []byte) (*chain.Info, error) {
	info, err := chain.InfoFromJSON(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("drand cannot parse the chain info: %w", err)
	}
	var v1 struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(body, &v1); err != nil {
		return nil, fmt.Errorf("chain info is not JSON: %w", err)
	}
	computed := info.HashString()
	if v1.Hash == "" {
		return nil, fmt.Errorf("chain info has no \"hash\" field (drand computes %s)", computed)
	}
	if !strings.EqualFold(v1.Hash, computed) {
		return nil, fmt.Errorf("chain info advertises hash %s but drand computes %s from its fields "+
			"(SHA-256 of u32_be(period) || i64_be(genesis_time) || public_key || groupHash [|| beaconID unless \"default\"])",
			v1.Hash, computed)
	}
	return info, nil
}

var httpClient = &nhttp.Client{Timeout: 30 * time.Second}

// trimURL removes trailing slashes so that paths can be appended.
func trimURL(u string) string { return strings.TrimRight(u, "/") }

// httpGet fetches url and returns the body of a 200 answer.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := nhttp.NewRequestWithContext(ctx, nhttp.MethodGet, url, nhttp.NoBody)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", url, err)
	}
	if resp.StatusCode != nhttp.StatusOK {
		return nil, &httpStatusError{url: url, status: resp.StatusCode, body: string(body)}
	}
	return body, nil
}

type httpStatusError struct {
	url    string
	status int
	body   string
}

func (e *httpStatusError) Error() string {
	b := strings.TrimSpace(e.body)
	if len(b) > 200 {
		b = b[:200] + "..."
	}
	return fmt.Sprintf("GET %s: status %d: %s", e.url, e.status, b)
}

// fetchChainInfo GETs {base}/info and parses it.
func fetchChainInfo(ctx context.Context, base string) (*chain.Info, error) {
	body, err := httpGet(ctx, trimURL(base)+"/info")
	if err != nil {
		return nil, err
	}
	info, err := parseChainInfo(body)
	if err != nil {
		return nil, fmt.Errorf("%s/info: %w", trimURL(base), err)
	}
	return info, nil
}

// beaconJSON is drand's v1 /public/{round} answer.
type beaconJSON struct {
	Round             uint64 `json:"round"`
	Randomness        string `json:"randomness"`
	Signature         string `json:"signature"`
	PreviousSignature string `json:"previous_signature,omitempty"`
}

// decoded holds a beacon's hex fields as bytes.
type decoded struct {
	round      uint64
	randomness []byte
	signature  []byte
	previous   []byte
}

// decodeBeacon parses a /public/ answer and checks that randomness is
// SHA-256(signature), which drand's HTTP client does not check (it recomputes
// the randomness and drops the server's).
func decodeBeacon(body []byte) (*decoded, error) {
	var b beaconJSON
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("beacon is not drand v1 JSON: %w", err)
	}
	d := &decoded{round: b.Round}
	var err error
	if d.signature, err = hex.DecodeString(b.Signature); err != nil || len(d.signature) == 0 {
		return nil, fmt.Errorf("round %d: signature %q is not non-empty hex", b.Round, b.Signature)
	}
	if d.randomness, err = hex.DecodeString(b.Randomness); err != nil {
		return nil, fmt.Errorf("round %d: randomness %q is not hex", b.Round, b.Randomness)
	}
	if d.previous, err = hex.DecodeString(b.PreviousSignature); err != nil {
		return nil, fmt.Errorf("round %d: previous_signature %q is not hex", b.Round, b.PreviousSignature)
	}
	want := sha256.Sum256(d.signature)
	if !bytes.Equal(d.randomness, want[:]) {
		return nil, fmt.Errorf("round %d: randomness %s is not SHA-256(signature) = %x", b.Round, b.Randomness, want)
	}
	return d, nil
}
