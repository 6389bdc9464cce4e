package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/drand/drand/v2/common"
	"github.com/drand/drand/v2/common/chain"
	"github.com/drand/drand/v2/crypto"
	"github.com/drand/kyber"
	"github.com/drand/tlock"
)

// staticNetwork implements tlock.Network from a chain info (for encryption)
// and a source of round signatures (for decryption), instead of tlock's
// networks/http, which needs a live drand relay at construction.
type staticNetwork struct {
	info   *chain.Info
	hash   string
	scheme *crypto.Scheme
	// sig returns round's signature; nil: decryption is not possible.
	sig func(round uint64) ([]byte, error)

	mu      sync.Mutex
	lastErr error // why the last Signature call failed (tlock reports only "too early")
}

var _ tlock.Network = (*staticNetwork)(nil)

// tlockSchemes are the schemes tlock can timelock to: those whose round
// message depends on the round number alone.
var tlockSchemes = map[string]bool{
	crypto.SigsOnG1ID:        true, // bls-unchained-g1-rfc9380 (quicknet)
	crypto.UnchainedSchemeID: true, // pedersen-bls-unchained
	crypto.ShortSigSchemeID:  true, // bls-unchained-on-g1 (fastnet, legacy DST)
}

func newStaticNetwork(info *chain.Info, hash string, sig func(uint64) ([]byte, error)) (*staticNetwork, error) {
	if !tlockSchemes[info.Scheme] {
		return nil, fmt.Errorf("scheme %s cannot be used for timelock encryption (tlock supports %s, %s and %s; "+
			"a chained scheme's round message includes the previous signature, unknown in advance)",
			info.Scheme, crypto.SigsOnG1ID, crypto.UnchainedSchemeID, crypto.ShortSigSchemeID)
	}
	sch, err := crypto.GetSchemeByID(info.Scheme)
	if err != nil {
		return nil, err
	}
	if hash == "" {
		hash = info.HashString()
	}
	return &staticNetwork{info: info, hash: hash, scheme: sch, sig: sig}, nil
}

func (n *staticNetwork) ChainHash() string      { return n.hash }
func (n *staticNetwork) PublicKey() kyber.Point { return n.info.PublicKey }
func (n *staticNetwork) Scheme() crypto.Scheme  { return *n.scheme }

// Current is the round due at t (0 before genesis; 0 on a chain with no
// period, whose rounds follow no schedule).
func (n *staticNetwork) Current(t time.Time) uint64 {
	if n.info.Period <= 0 || t.Unix() < n.info.GenesisTime {
		return 0
	}
	return common.CurrentRound(t.Unix(), n.info.Period, n.info.GenesisTime)
}

func (n *staticNetwork) Signature(round uint64) ([]byte, error) {
	var sig []byte
	err := errors.New("this network has no signature source")
	if n.sig != nil {
		sig, err = n.sig(round)
	}
	n.mu.Lock()
	n.lastErr = err
	n.mu.Unlock()
	return sig, err
}

func (n *staticNetwork) SwitchChainHash(h string) error {
	return fmt.Errorf("the ciphertext is for chain %s, not this chain %s", h, n.hash)
}

func (n *staticNetwork) lastSignatureError() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastErr
}

// httpSignatures returns a signature source that GETs {base}/public/{round}
// (drand's v1 JSON) and checks the round and the randomness field; tlock
// itself verifies the signature against the chain's public key.
func httpSignatures(ctx context.Context, base string) func(uint64) ([]byte, error) {
	base = trimURL(base)
	return func(round uint64) ([]byte, error) {
		body, err := httpGet(ctx, fmt.Sprintf("%s/public/%d", base, round))
		if err != nil {
			return nil, err
		}
		d, err := decodeBeacon(body)
		if err != nil {
			return nil, err
		}
		if d.round != round {
			return nil, fmt.Errorf("asked for round %d, got round %d", round, d.round)
		}
		return d.signature, nil
	}
}
