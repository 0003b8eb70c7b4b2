package prevalidate_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/tls13"
)

// Prefetch on a link's hover, connect at the click: the connection with
// the same Options takes the addresses, the Z-data and the verified
// chain from the cache, and its report says so.
func Example() {
	res, err := resolver.New(resolver.Config{Servers: []string{"127.0.0.1:53"}})
	if err != nil {
		log.Fatal(err)
	}
	defer res.Close()
	cache := prevalidate.NewCache(prevalidate.CacheOptions{Refresh: true})
	defer cache.Close()
	opts := dial.Options{TLS: &tls13.Config{}, Resolver: res, Cache: cache,
		Request: []byte("GET / HTTP/1.1\r\nHost: www.example.com\r\n\r\n"), ReplaySafe: true, ReadResponse: 1 << 16}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range prevalidate.Prefetch(ctx, opts.Prevalidation(), "www.example.com") {
		if p.Err != nil {
			log.Printf("%s: %v", p.Target, p.Err)
			continue
		}
		fmt.Printf("%s: expires %s (%s)\n", p.Target, p.Expires.Format(time.RFC3339), p.ExpiresBy)
	}

	r, err := dial.Connect(ctx, "www.example.com:443", opts)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Conn.Close()
	fmt.Println("from the cache:", r.Report.Prefetch) // "validated": no lookup, no chain verification
}

func ExampleParseTarget() {
	for _, s := range []string{"example.com", "https://example.com/a/page", "example.com:8443", "2001:db8::1"} {
		t, err := prevalidate.ParseTarget(s)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(t)
	}
	// Output:
	// example.com:443
	// example.com:443
	// example.com:8443
	// [2001:db8::1]:443
}
