package ztlshttp_test

import (
	"fmt"

	"github.com/ztls-project/ztls/ztlshttp"
)

// EarlySafe tells which first requests may go as early data without the
// user opting in: only a whole request that is safe to replay.
func ExampleEarlySafe() {
	for _, req := range []string{
		"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n\r\n",
		"POST /order HTTP/1.1\r\nHost: www.example.com\r\nContent-Length: 0\r\n\r\n",
		"GET /",
	} {
		ok, _ := ztlshttp.EarlySafe([]byte(req))
		fmt.Println(ok)
	}
	// Output:
	// true
	// false
	// true
}
