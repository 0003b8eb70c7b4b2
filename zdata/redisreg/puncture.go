package redisreg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/tls13"
)

// PunctureLog is a fleet's shared record of punctured BFE key slots
// (bfe.PunctureLog; docs/ztls-spec.md, Section 7.6) in the Redis of a
// Register: one bitmap per service and epoch, set by one Lua script that
// SETBITs a ciphertext's positions and returns their old values, so of
// two members racing on one ciphertext exactly one sees its positions
// unset. It shares the Register's connections, its refusal of an evicting
// maxmemory-policy and its memory marker: a bitmap Redis may have lost
// since the epoch began (a restart without persistence, a failover) would
// let a replay through on another member, so the log then fails closed
// (an error: early data refused) until the epoch is over. Safe for
// concurrent use.
type PunctureLog struct {
	r       *Register
	service string
	start   func(epoch uint64) time.Time
	ttl     time.Duration
}

var _ bfe.PunctureLog = (*PunctureLog)(nil)

// PunctureLog returns the log of one service (its host and port, which
// name its bitmaps) whose BFE epochs are the Unix seconds at which the
// keys' records become valid (as package zdata makes them) and live for
// at most life: each bitmap expires a day after that.
func (r *Register) PunctureLog(host string, port int, life time.Duration) *PunctureLog {
	return &PunctureLog{r: r, service: host + ":" + strconv.Itoa(port),
		start: func(e uint64) time.Time { return time.Unix(int64(e), 0) }, ttl: life + 24*time.Hour}
}

// punctureScript sets the positions of one ciphertext in an epoch's
// bitmap (KEYS[1]) when Redis's memory covers the epoch, with the marker
// rules of markedScript: ARGV[1] the latest acceptable "since" (epoch
// start - MaxClockSkew, Unix ms), ARGV[2] the bitmap's PX, ARGV[6..] the
// positions. Reply: {1, old bit...} set, or markedScript's.
var punctureScript = markedScript(`
    local out = {1}
    for i = 6, #ARGV do
      out[#out + 1] = redis.call('SETBIT', KEYS[1], ARGV[i], 1)
    end
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return out
`)

// TestAndSet implements bfe.PunctureLog. Any failure, Redis unreachable
// included, is an error: bfe then refuses the ciphertext (fail closed).
// Each Redis call is bounded by the Register's Options.Timeout; ctx is
// checked before the call.
func (l *PunctureLog) TestAndSet(ctx context.Context, epoch uint64, positions []uint32) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := l.r
	if err := r.checkPolicy(); err != nil {
		return nil, err
	}
	name := l.service + ":" + strconv.FormatUint(epoch, 10)
	tag := r.tag([]byte(name))
	key, marker := r.opts.Prefix+tag+"bfe:"+name, r.markerKey(tag)
	skew := ceilMS(r.opts.MaxClockSkew)
	latestSince := l.start(epoch).UnixMilli() - skew
	for recorded := false; ; recorded = true {
		token := r.id + strconv.FormatUint(r.seq.Add(1), 16)
		args := []any{latestSince, ceilMS(l.ttl), token, 2 * ceilMS(r.opts.Timeout)}
		for _, p := range positions {
			args = append(args, p)
		}
		arr, err := r.execRetry(punctureScript, "puncture script", []string{key, marker}, args)
		if err != nil {
			return nil, err
		}
		code, was, err := punctureResult(arr, len(positions))
		if err != nil {
			return nil, err
		}
		switch {
		case code == resInserted:
			return was, nil
		case code == resTooYoung:
			return nil, fmt.Errorf("redisreg: Redis's memory of punctures does not cover epoch %d (a loss of data): %w", epoch, tls13.ErrRegisterTooYoung)
		case code == resPending:
			return nil, fmt.Errorf("redisreg: Redis lost data and another server is recording when: %w", tls13.ErrRegisterTooYoung)
		case code == resLost:
			if recorded {
				return nil, fmt.Errorf("redisreg: Redis lost data again while recording a loss: %w", tls13.ErrRegisterTooYoung)
			}
			if err := r.recordLoss(marker, token); err != nil {
				return nil, err
			}
			r.sweep(marker)
			// The marker now says "since now", after the epoch began: the
			// next round refuses, as it must.
		}
	}
}

// punctureResult decodes punctureScript's reply for n positions.
func punctureResult(arr []any, n int) (code int64, was []bool, err error) {
	if len(arr) == 0 {
		return 0, nil, errors.New("redisreg: empty reply to the puncture script")
	}
	code, ok := arr[0].(int64)
	if !ok {
		return 0, nil, errors.New("redisreg: unexpected reply to the puncture script")
	}
	switch {
	case code == resInserted && len(arr) == 1+n:
		was = make([]bool, n)
		for i, m := range arr[1:] {
			b, ok := m.(int64)
			if !ok || (b != 0 && b != 1) {
				return 0, nil, errors.New("redisreg: bad bit in the puncture script's reply")
			}
			was[i] = b == 1
		}
		return code, was, nil
	case (code == resTooYoung && len(arr) == 2) || ((code == resPending || code == resLost) && len(arr) == 1):
		return code, nil, nil
	}
	return 0, nil, errors.New("redisreg: unexpected puncture script result")
}
