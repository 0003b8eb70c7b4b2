package bfe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ztls-project/ztls/bfe"
)

func Example() {
	dir, err := os.MkdirTemp("", "bfe-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Server, in the background an epoch ahead: size the filter and
	// generate the epoch's key file. (A real epoch: n = 2^14.) NewParams
	// takes the fewest hash functions, hence pairings, whose key stays
	// within bfe.KeyBytesPerConnection; bfe.NewParamsSized with
	// bfe.SmallestKey takes the smallest key instead (k = 10 here).
	params, err := bfe.NewParams(64, bfe.DefaultFalsePositiveRate)
	if err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "epoch-42.key")
	pk, err := bfe.GenerateKey(context.Background(), path, bfe.KeyGenConfig{Epoch: 42, Params: params})
	if err != nil {
		log.Fatal(err)
	}
	published := pk.Bytes() // goes into the signed Z-data record

	// Client: encapsulate to the published key.
	clientPK, err := bfe.ParsePublicKey(published)
	if err != nil {
		log.Fatal(err)
	}
	ciphertext, clientKey, err := clientPK.Encapsulate(nil)
	if err != nil {
		log.Fatal(err)
	}

	// Server: decapsulate, which punctures the key file first.
	ks, err := bfe.OpenKeyState(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ks.Close()
	serverKey, err := ks.Decapsulate(context.Background(), ciphertext)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same key:", bytes.Equal(clientKey, serverKey))

	// A replay finds every position punctured.
	_, err = ks.Decapsulate(context.Background(), ciphertext)
	fmt.Println("replay refused:", errors.Is(err, bfe.ErrPunctured))
	fmt.Printf("m=%d k=%d, ciphertext %d bytes\n", params.M, params.K, len(ciphertext))
	// Output:
	// same key: true
	// replay refused: true
	// m=1113 k=5, ciphertext 256 bytes
}
