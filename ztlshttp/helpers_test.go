package ztlshttp

import "github.com/ztls-project/ztls/zdata"

// zdataALPN publishes Z-data whose early data is for HTTP/1.1.
func zdataALPN() zdata.Options { return zdata.Options{ALPN: "http/1.1"} }
