package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age/armor"
	"github.com/drand/tlock"
)

func cmdEncrypt(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("tle-encrypt", stderr)
	infoPath := fs.String("chain-info", "", "drand v1 chain info JSON file (required)")
	round := fs.Uint64("round", 0, "round to timelock to (required, >= 1)")
	in := fs.String("in", "", "plaintext file (default: stdin)")
	out := fs.String("out", "", "ciphertext file (default: stdout)")
	armored := fs.Bool("armor", false, "write ASCII-armored age (-----BEGIN AGE ENCRYPTED FILE-----)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *infoPath == "" || *round == 0 {
		return fmt.Errorf("%w: --chain-info FILE and --round R (R >= 1) are required", errUsage)
	}
	body, err := os.ReadFile(*infoPath)
	if err != nil {
		return err
	}
	info, err := parseChainInfo(body)
	if err != nil {
		return fmt.Errorf("%s: %w", *infoPath, err)
	}
	network, err := newStaticNetwork(info, "", nil)
	if err != nil {
		return err
	}
	plaintext, err := readInput(*in, stdin)
	if err != nil {
		return err
	}
	var ct bytes.Buffer
	if err := encrypt(&ct, plaintext, network, *round, *armored); err != nil {
		return err
	}
	return writeOutput(*out, stdout, ct.Bytes())
}

func encrypt(dst io.Writer, plaintext []byte, network tlock.Network, round uint64, armored bool) error {
	if !armored {
		if err := tlock.New(network).Encrypt(dst, bytes.NewReader(plaintext), round); err != nil {
			return fmt.Errorf("tlock encrypt: %w", err)
		}
		return nil
	}
	aw := armor.NewWriter(dst)
	if err := tlock.New(network).Encrypt(aw, bytes.NewReader(plaintext), round); err != nil {
		return fmt.Errorf("tlock encrypt: %w", err)
	}
	return aw.Close()
}

func cmdDecrypt(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("tle-decrypt", stderr)
	url := fs.String("url", "", "base URL of a node's drand v1 API (required)")
	in := fs.String("in", "", "ciphertext file, binary or armored (default: stdin)")
	out := fs.String("out", "", "plaintext file (default: stdout)")
	timeout := fs.Duration("timeout", time.Minute, "overall time limit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url == "" {
		return fmt.Errorf("%w: --url is required", errUsage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	info, err := fetchChainInfo(ctx, *url)
	if err != nil {
		return err
	}
	network, err := newStaticNetwork(info, "", httpSignatures(ctx, *url))
	if err != nil {
		return err
	}
	ciphertext, err := readInput(*in, stdin)
	if err != nil {
		return err
	}
	plaintext, err := decrypt(ciphertext, network)
	if err != nil {
		return err
	}
	return writeOutput(*out, stdout, plaintext)
}

// decrypt decrypts with tlock in strict mode: the ciphertext's chain hash
// must be this network's.
func decrypt(ciphertext []byte, network *staticNetwork) ([]byte, error) {
	var pt bytes.Buffer
	err := tlock.New(network).Strict().Decrypt(&pt, bytes.NewReader(ciphertext))
	if err != nil {
		// tlock turns any failure to get the signature into ErrTooEarly;
		// say what actually happened.
		if errors.Is(err, tlock.ErrTooEarly) {
			if why := network.lastSignatureError(); why != nil {
				return nil, fmt.Errorf("tlock decrypt: %w (signature: %v)", err, why)
			}
		}
		return nil, fmt.Errorf("tlock decrypt: %w", err)
	}
	return pt.Bytes(), nil
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "" || path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}

// writeOutput writes data to path atomically (a temporary file renamed into
// place), or to stdout when path is empty.
func writeOutput(path string, stdout io.Writer, data []byte) error {
	if path == "" || path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".drand-interop-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
