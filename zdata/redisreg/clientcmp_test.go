package redisreg

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// infoRunScript is insertScript reading the run_id in the script.
var infoRunScript = strings.Replace(insertScript, "local run = ARGV[5]", "local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')", 1)

func BenchmarkClientCmp(b *testing.B) {
	s := startRedis(b, 0)
	c0, _ := net.Dial("tcp", s.addr)
	rc := &conn{nc: c0, br: bufio.NewReader(c0)}
	rc.readRunID(time.Second)
	run := string(rc.run)
	rc.do(time.Second, []byte("SET"), []byte(DefaultPrefix+"marker"), []byte("since 0 "+run))
	c0.Close()
	marker := DefaultPrefix + "marker"
	args := func(i int) []string {
		return []string{"1", "20000", "tok", "2000", run}
	}
	key := func(i int) string { return DefaultPrefix + strconv.Itoa(i) }
	ctx := context.Background()
	var seq atomic.Int64
	par := func(name string, one func() func(i int) error) {
		b.Run(name+"-par8", func(b *testing.B) {
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				f := one()
				for pb.Next() {
					if err := f(int(seq.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: s.addr, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	rcl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer rcl.Close()
	gsc, rsc := goredis.NewScript(insertScript), rueidis.NewLuaScript(insertScript)
	for round := 0; round < 3; round++ {
		par("resp.go", func() func(int) error {
			nc, _ := net.Dial("tcp", s.addr)
			c := &conn{nc: nc, br: bufio.NewReader(nc)}
			return func(i int) error {
				a := args(i)
				_, err := c.eval(time.Second, insertScript, insertSHA, [][]byte{[]byte(key(i) + "O"), []byte(marker)},
					[]byte(a[0]), []byte(a[1]), []byte(a[2]), []byte(a[3]), []byte(a[4]))
				return err
			}
		})
		par("go-redis", func() func(int) error {
			return func(i int) error {
				return gsc.Run(ctx, rdb, []string{key(i) + "G", marker}, args(i)).Err()
			}
		})
		par("rueidis", func() func(int) error {
			return func(i int) error {
				return rsc.Exec(ctx, rcl, []string{key(i) + "R", marker}, args(i)).Error()
			}
		})
		b.Run("resp.go", func(b *testing.B) {
			nc, _ := net.Dial("tcp", s.addr)
			c := &conn{nc: nc, br: bufio.NewReader(nc)}
			defer nc.Close()
			i := 0
			for b.Loop() {
				i++
				a := args(i)
				rep, err := c.eval(time.Second, insertScript, insertSHA, [][]byte{[]byte(key(i) + "o"), []byte(marker)},
					[]byte(a[0]), []byte(a[1]), []byte(a[2]), []byte(a[3]), []byte(a[4]))
				if err != nil || rep.kind != '*' {
					b.Fatal(err, rep)
				}
			}
		})
		b.Run("resp.go-INFO", func(b *testing.B) {
			nc, _ := net.Dial("tcp", s.addr)
			c := &conn{nc: nc, br: bufio.NewReader(nc)}
			defer nc.Close()
			sha := scriptSHA(infoRunScript)
			i := 0
			for b.Loop() {
				i++
				i += round << 24
				a := args(i)
				rep, err := c.eval(time.Second, infoRunScript, sha, [][]byte{[]byte(key(i) + "i"), []byte(marker)},
					[]byte(a[0]), []byte(a[1]), []byte(a[2]), []byte(a[3]), []byte(a[4]))
				if err != nil || rep.kind != '*' || rep.array[0].num != 1 {
					b.Fatal(err, rep)
				}
			}
		})
		b.Run("go-redis", func(b *testing.B) {
			rdb := goredis.NewClient(&goredis.Options{Addr: s.addr, Protocol: 2, DisableIdentity: true})
			defer rdb.Close()
			sc := goredis.NewScript(insertScript)
			i := 0
			for b.Loop() {
				i++
				a := args(i)
				if _, err := sc.Run(ctx, rdb, []string{key(i) + "g", marker}, a[0], a[1], a[2], a[3], a[4]).Slice(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("rueidis", func(b *testing.B) {
			cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			sc := rueidis.NewLuaScript(insertScript)
			i := 0
			for b.Loop() {
				i++
				if _, err := sc.Exec(ctx, cl, []string{key(i) + "r", marker}, args(i)).ToArray(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
