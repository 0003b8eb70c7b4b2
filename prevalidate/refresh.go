package prevalidate

import (
	"context"
	"sync"
	"time"
)

// refreshFraction: an entry that was used is renewed in the last
// 1/refreshFraction of its life (as the resolver's prefetch renews a
// record used in the last tenth of its TTL).
const refreshFraction = 10

// refreshTimeout bounds one renewal.
const refreshTimeout = 30 * time.Second

// refresher is a Cache's background renewal (CacheOptions.Refresh): one
// goroutine, started when the first entry that Prefetch fetched is
// stored, that sleeps until the next used entry is due.
type refresher struct {
	c      *Cache
	start  sync.Once
	wakeCh chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newRefresher(c *Cache) *refresher {
	ctx, cancel := context.WithCancel(context.Background())
	return &refresher{c: c, wakeCh: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// wake has the refresher look at the entries again (starting it).
func (r *refresher) wake() {
	r.start.Do(func() { go r.loop() })
	select {
	case r.wakeCh <- struct{}{}:
	default:
	}
}

func (r *refresher) stop() {
	r.cancel()
	started := true
	r.start.Do(func() { started = false })
	if started {
		<-r.done
	}
}

func (r *refresher) loop() {
	defer close(r.done)
	for {
		next := r.c.refreshDue(r.ctx)
		wait := time.Minute
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(r.c.now()), time.Second))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.wakeCh:
			t.Stop()
		case <-r.ctx.Done():
			t.Stop()
			return
		}
	}
}

// refreshAt is when s is due for renewal.
func refreshAt(s *service) time.Time {
	life := s.expires.Sub(s.fetched)
	return s.expires.Add(-max(life/refreshFraction, time.Second))
}

// refreshDue renews the entries that were used and are due, and returns
// when the next entry Prefetch fetched will be due (zero: none).
func (c *Cache) refreshDue(ctx context.Context) time.Time {
	now := c.now()
	type job struct {
		o      Options
		target string
	}
	var jobs []job
	var next time.Time
	c.mu.Lock()
	for el := c.ll.Front(); el != nil; el = el.Next() {
		s := el.Value.(*service)
		if s.opts == nil || !now.Before(s.expires) {
			continue
		}
		at := refreshAt(s)
		switch {
		case !now.Before(at) && s.used:
			jobs = append(jobs, job{*s.opts, hostPort(s.host, s.port)})
			s.opts = nil // once
		case now.Before(at) && (next.IsZero() || at.Before(next)):
			next = at
		}
	}
	c.mu.Unlock()
	for _, j := range jobs {
		jctx, cancel := context.WithTimeout(ctx, refreshTimeout)
		prefetchOne(jctx, j.o, j.target)
		cancel()
		if ctx.Err() != nil {
			break
		}
	}
	return next
}
