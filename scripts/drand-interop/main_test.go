package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	nhttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drand/drand/v2/common"
	"github.com/drand/drand/v2/common/chain"
	"github.com/drand/drand/v2/crypto"
	"github.com/drand/kyber/util/random"
)

// fakeChain is a chain made with drand's crypto and served in drand's v1
// JSON, the way an sbft-beacon node serves it.
type fakeChain struct {
	info     *chain.Info
	infoJSON map[string]any
	beacons  []beaconJSON // beacons[r-1] is round r
	srv      *httptest.Server
}

func newFakeChain(t *testing.T, scheme, beaconID string, period time.Duration, rounds int) *fakeChain {
	t.Helper()
	sch, err := crypto.GetSchemeByID(scheme)
	if err != nil {
		t.Fatal(err)
	}
	secret := sch.KeyGroup.Scalar().Pick(random.New())
	public := sch.KeyGroup.Point().Mul(secret, nil)
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	genesis := time.Now().Add(-time.Duration(rounds) * period).Unix()
	if period == 0 {
		genesis = time.Now().Add(-time.Hour).Unix()
	}
	info := &chain.Info{
		PublicKey: public, ID: beaconID, Period: period, Scheme: scheme,
		GenesisTime: genesis, GenesisSeed: seed,
	}
	pk, _ := public.MarshalBinary()
	fc := &fakeChain{
		info: info,
		infoJSON: map[string]any{
			"public_key":   hex.EncodeToString(pk),
			"period":       uint64(period.Seconds()),
			"genesis_time": genesis,
			"hash":         info.HashString(),
			"groupHash":    hex.EncodeToString(seed),
			"schemeID":     scheme,
			"metadata":     map[string]string{"beaconID": beaconID},
		},
	}
	prev := seed
	for r := uint64(1); r <= uint64(rounds); r++ {
		b := &common.Beacon{Round: r, PreviousSig: prev}
		if scheme != crypto.DefaultSchemeID {
			b.PreviousSig = nil
		}
		sig, err := sch.AuthScheme.Sign(secret, sch.DigestBeacon(b))
		if err != nil {
			t.Fatal(err)
		}
		b.Signature = sig
		if err := sch.VerifyBeacon(b, public); err != nil {
			t.Fatalf("fake chain: drand rejects its own round %d: %v", r, err)
		}
		rnd := sha256.Sum256(sig)
		fc.beacons = append(fc.beacons, beaconJSON{
			Round: r, Randomness: hex.EncodeToString(rnd[:]), Signature: hex.EncodeToString(sig),
			PreviousSignature: hex.EncodeToString(b.PreviousSig),
		})
		prev = sig
	}
	fc.srv = httptest.NewServer(fc)
	t.Cleanup(fc.srv.Close)
	return fc
}

// ServeHTTP serves /info, /public/latest, /public/{round} and the same under
// /{chainhash}/, as drand's v1 API does.
func (fc *fakeChain) ServeHTTP(w nhttp.ResponseWriter, r *nhttp.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) > 0 && parts[0] != "info" && parts[0] != "public" {
		if parts[0] != fc.info.HashString() {
			nhttp.Error(w, "unknown chain hash", nhttp.StatusNotFound)
			return
		}
		parts = parts[1:]
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case len(parts) == 1 && parts[0] == "info":
		_ = json.NewEncoder(w).Encode(fc.infoJSON)
	case len(parts) == 2 && parts[0] == "public":
		round := uint64(len(fc.beacons))
		if parts[1] != "latest" {
			n, err := strconv.ParseUint(parts[1], 10, 64)
			if err != nil {
				nhttp.Error(w, "bad round", nhttp.StatusBadRequest)
				return
			}
			round = n
		}
		if round == 0 || round > uint64(len(fc.beacons)) {
			nhttp.Error(w, "round not yet produced", nhttp.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(fc.beacons[round-1])
	default:
		nhttp.NotFound(w, r)
	}
}

func runCmd(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	rc := run(args, bytes.NewReader(stdin), &out, &errb)
	return rc, out.String(), errb.String()
}

var schemes = []struct {
	scheme, beaconID string
	period           time.Duration
}{
	{crypto.DefaultSchemeID, "default", 3 * time.Second},
	{crypto.SigsOnG1ID, "quicknet", 0},
	{crypto.UnchainedSchemeID, "unchained", time.Second},
}

func TestClientVerify(t *testing.T) {
	for _, s := range schemes {
		t.Run(s.scheme, func(t *testing.T) {
			fc := newFakeChain(t, s.scheme, s.beaconID, s.period, 12)
			for _, withHash := range []bool{false, true} {
				args := []string{"client-verify", "--url", fc.srv.URL + "/", "--rounds", "8", "--wait", "5s"}
				if withHash {
					args = append(args, "--chain-hash", fc.info.HashString())
				}
				rc, out, errOut := runCmd(t, nil, args...)
				if rc != 0 {
					t.Fatalf("rc %d, stderr: %s", rc, errOut)
				}
				if strings.Count(out, "\n") != 1 {
					t.Fatalf("want one line of output, got %q", out)
				}
				var sum verifySummary
				if err := json.Unmarshal([]byte(out), &sum); err != nil {
					t.Fatal(err)
				}
				want := verifySummary{
					ChainHash: fc.info.HashString(), Scheme: s.scheme, BeaconID: s.beaconID,
					Period: uint64(s.period.Seconds()), VerifiedRounds: 8, Latest: 12, Requests: sum.Requests,
				}
				if sum != want {
					t.Fatalf("got %+v, want %+v", sum, want)
				}
			}
		})
	}
}

func TestClientVerifyRejects(t *testing.T) {
	cases := []struct {
		name, scheme string
		tamper       func(fc *fakeChain)
		args         []string
		want         string
	}{
		{"wrong chain hash", crypto.SigsOnG1ID, nil,
			[]string{"--chain-hash", strings.Repeat("ab", 32)}, "status 404"},
		{"forged signature", crypto.SigsOnG1ID, func(fc *fakeChain) {
			fc.beacons[2].Signature = fc.beacons[3].Signature
			fc.beacons[2].Randomness = fc.beacons[3].Randomness
		}, nil, "round 3: drand's verifying client refused it"},
		{"forged chained signature", crypto.DefaultSchemeID, func(fc *fakeChain) {
			fc.beacons[4].Signature = fc.beacons[5].Signature
			fc.beacons[4].Randomness = fc.beacons[5].Randomness
		}, nil, "round 5: drand's verifying client refused it"},
		{"wrong previous_signature", crypto.DefaultSchemeID, func(fc *fakeChain) {
			fc.beacons[3].PreviousSignature = fc.beacons[1].Signature
		}, nil, "raw check: round 4: previous_signature"},
		{"wrong randomness", crypto.UnchainedSchemeID, func(fc *fakeChain) {
			fc.beacons[1].Randomness = strings.Repeat("00", 32)
		}, nil, "randomness"},
		{"previous_signature on unchained", crypto.SigsOnG1ID, func(fc *fakeChain) {
			fc.beacons[1].PreviousSignature = fc.beacons[0].Signature
		}, nil, "has a previous_signature"},
		{"wrong info hash", crypto.SigsOnG1ID, func(fc *fakeChain) {
			fc.infoJSON["hash"] = strings.Repeat("cd", 32)
		}, nil, "but drand computes"},
		{"round not produced", crypto.SigsOnG1ID, nil, []string{"--rounds", "50"}, "status 404"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fc := newFakeChain(t, c.scheme, "beacon", time.Second, 8)
			if c.tamper != nil {
				c.tamper(fc)
			}
			args := append([]string{"client-verify", "--url", fc.srv.URL, "--rounds", "6", "--timeout", "20s"}, c.args...)
			rc, out, errOut := runCmd(t, nil, args...)
			if rc != 1 || out != "" || !strings.Contains(errOut, c.want) {
				t.Fatalf("rc %d, stdout %q, stderr %q; want rc 1 and %q", rc, out, errOut, c.want)
			}
		})
	}
}

func writeInfo(t *testing.T, fc *fakeChain) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "info.json")
	b, _ := json.Marshal(fc.infoJSON)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTimelockRoundTrip(t *testing.T) {
	for _, s := range schemes[1:] {
		t.Run(s.scheme, func(t *testing.T) {
			fc := newFakeChain(t, s.scheme, s.beaconID, s.period, 10)
			infoPath := writeInfo(t, fc)
			dir := t.TempDir()
			plain := []byte("attack at dawn\x00\xff and then some more bytes")
			for _, armor := range []bool{false, true} {
				ct := filepath.Join(dir, fmt.Sprintf("ct-%v.age", armor))
				args := []string{"tle-encrypt", "--chain-info", infoPath, "--round", "7", "--out", ct}
				if armor {
					args = append(args, "--armor")
				}
				if rc, _, e := runCmd(t, plain, args...); rc != 0 {
					t.Fatalf("encrypt: rc %d: %s", rc, e)
				}
				ctBytes, _ := os.ReadFile(ct)
				if armor != bytes.HasPrefix(ctBytes, []byte("-----BEGIN AGE ENCRYPTED FILE-----")) {
					t.Fatalf("armor %v, ciphertext starts %q", armor, ctBytes[:20])
				}
				rc, out, e := runCmd(t, nil, "tle-decrypt", "--url", fc.srv.URL, "--in", ct)
				if rc != 0 || out != string(plain) {
					t.Fatalf("decrypt: rc %d, out %q, stderr %s", rc, out, e)
				}
				outPath := filepath.Join(dir, "pt")
				rc, out, e = runCmd(t, ctBytes, "tle-decrypt", "--url", fc.srv.URL, "--out", outPath)
				got, _ := os.ReadFile(outPath)
				if rc != 0 || out != "" || !bytes.Equal(got, plain) {
					t.Fatalf("decrypt stdin->file: rc %d, out %q, file %q, stderr %s", rc, out, got, e)
				}
			}

			// A round not produced yet: too early, and why.
			var ct bytes.Buffer
			if rc := run([]string{"tle-encrypt", "--chain-info", infoPath, "--round", "11"},
				bytes.NewReader(plain), &ct, os.Stderr); rc != 0 {
				t.Fatalf("encrypt: rc %d", rc)
			}
			rc, out, e := runCmd(t, ct.Bytes(), "tle-decrypt", "--url", fc.srv.URL)
			if rc != 1 || out != "" || !strings.Contains(e, "too early") || !strings.Contains(e, "status 404") {
				t.Fatalf("early decrypt: rc %d, out %q, stderr %q", rc, out, e)
			}

			// Another chain of the same scheme cannot decrypt it.
			other := newFakeChain(t, s.scheme, s.beaconID, s.period, 12)
			rc, _, e = runCmd(t, ct.Bytes(), "tle-decrypt", "--url", other.srv.URL)
			if rc != 1 || !strings.Contains(e, "invalid chainhash") {
				t.Fatalf("other chain: rc %d, stderr %q", rc, e)
			}

			// A node serving a wrong signature for the round is caught by tlock.
			fc.beacons[6].Signature = fc.beacons[5].Signature
			fc.beacons[6].Randomness = fc.beacons[5].Randomness
			var ct7 bytes.Buffer
			if rc := run([]string{"tle-encrypt", "--chain-info", infoPath, "--round", "7"},
				bytes.NewReader(plain), &ct7, os.Stderr); rc != 0 {
				t.Fatalf("encrypt: rc %d", rc)
			}
			rc, _, e = runCmd(t, ct7.Bytes(), "tle-decrypt", "--url", fc.srv.URL)
			if rc != 1 || !strings.Contains(e, "verify beacon") {
				t.Fatalf("forged signature: rc %d, stderr %q", rc, e)
			}
		})
	}
}

func TestTimelockRefusesChainedScheme(t *testing.T) {
	fc := newFakeChain(t, crypto.DefaultSchemeID, "default", time.Second, 2)
	rc, out, e := runCmd(t, []byte("x"), "tle-encrypt", "--chain-info", writeInfo(t, fc), "--round", "5")
	if rc != 1 || out != "" || !strings.Contains(e, "cannot be used for timelock") {
		t.Fatalf("rc %d, out %q, stderr %q", rc, out, e)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{}, {"nope"}, {"client-verify"}, {"client-verify", "--url", "http://x"},
		{"tle-encrypt", "--round", "3"}, {"tle-decrypt"}, {"vectors", "extra"},
		{"client-verify", "--url", "http://x", "--rounds", "1", "--chain-hash", "zz"},
	} {
		if rc, _, _ := runCmd(t, nil, args...); rc != 2 {
			t.Errorf("%q: rc %d, want 2", args, rc)
		}
	}
}

func TestVectors(t *testing.T) {
	rc, out, e := runCmd(t, nil, "vectors")
	if rc != 0 {
		t.Fatalf("rc %d: %s", rc, e)
	}
	if n := strings.Count(out, "\"ok\":true"); n != len(vectors)+1 {
		t.Fatalf("%d ok lines, want %d:\n%s", n, len(vectors)+1, out)
	}
	for _, want := range []string{"Hello drand World\\n", strings.Repeat("00", 100)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
