package redisreg_test

import (
	"log"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata/redisreg"
)

// A fleet server shares its strike register with the others through one
// Redis (run with maxmemory-policy noeviction, clocks kept within
// MaxClockSkew by NTP).
func ExampleNew() {
	reg, err := redisreg.New(redisreg.Options{
		Addr:         "127.0.0.1:6379",
		MaxClockSkew: time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	cfg := &tls13.Config{StrikeRegister: reg, EarlyDataWindow: 10 * time.Second, MaxEarlyData: 16 << 10}
	_ = cfg // with Certificates and ZData, passed to tls13.Server
}
