package netem

import (
	"math/rand/v2"
	"testing"
	"time"
)

func newState(l Link) *linkState {
	return &linkState{cfg: l, rng: rand.New(rand.NewPCG(1, 2))}
}

func TestScheduleDelay(t *testing.T) {
	s := newState(Link{Delay: 20 * time.Millisecond})
	due, ok := s.schedule(1000, 100, 0)
	if !ok || due != 1000+int64(20*time.Millisecond) {
		t.Fatalf("due %d ok %v", due, ok)
	}
	s = newState(Link{Delay: 20 * time.Millisecond})
	due, _ = s.schedule(1000, 100, int64(50*time.Microsecond))
	if want := 1000 + int64(20*time.Millisecond-50*time.Microsecond); due != want {
		t.Fatalf("compensated due %d, want %d", due, want)
	}
	z := newState(Link{})
	if due, _ := z.schedule(5, 100, int64(time.Millisecond)); due != 5 {
		t.Fatalf("compensation made the delay negative: due %d", due)
	}
}

func TestJitterKeepsOrder(t *testing.T) {
	l := Link{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}
	s := newState(l)
	var last int64
	spread := map[bool]bool{}
	for i := int64(0); i < 10000; i++ {
		now := i * int64(20*time.Millisecond) // sparse: order never forces a wait
		due, ok := s.schedule(now, 1000, 0)
		if !ok {
			t.Fatal("dropped without loss")
		}
		if due < last {
			t.Fatalf("packet %d due %d before previous %d", i, due, last)
		}
		if due-now < int64(l.Delay-l.Jitter) || due-now > int64(l.Delay+l.Jitter)+int64(10*time.Millisecond) {
			t.Fatalf("packet %d delay %v outside jitter bounds", i, time.Duration(due-now))
		}
		spread[due-now > int64(l.Delay)] = true
		last = due
	}
	if len(spread) != 2 {
		t.Fatal("jitter never moved a packet to both sides of the delay")
	}
}

func TestLossRate(t *testing.T) {
	s := newState(Link{Loss: 0.1})
	for i := 0; i < 100000; i++ {
		s.schedule(int64(i), 100, 0)
	}
	if s.lost < 9000 || s.lost > 11000 {
		t.Fatalf("lost %d of 100000 at 10%%", s.lost)
	}
	if s.lost+s.forward != 100000 {
		t.Fatalf("lost %d + forward %d != 100000", s.lost, s.forward)
	}
}

func TestRateSerialises(t *testing.T) {
	// 1500-byte packets at 12 Mbit/s take 1 ms each.
	s := newState(Link{Rate: 12_000_000, QueueLimit: 5 * time.Millisecond})
	var dues []int64
	for i := 0; i < 10; i++ {
		if due, ok := s.schedule(0, 1500, 0); ok {
			dues = append(dues, due)
		}
	}
	if len(dues) != 6 {
		t.Fatalf("queue kept %d packets, want 6 (5 ms limit at 1 ms each)", len(dues))
	}
	for i, d := range dues {
		if want := int64(i+1) * int64(time.Millisecond); d != want {
			t.Fatalf("packet %d due %v, want %v", i, time.Duration(d), time.Duration(want))
		}
	}
	if s.overflow != 4 {
		t.Fatalf("overflow %d, want 4", s.overflow)
	}
}

func TestLinkValidate(t *testing.T) {
	bad := []Link{
		{Delay: -1},
		{Delay: 2 * time.Minute},
		{Delay: time.Millisecond, Jitter: 2 * time.Millisecond},
		{Loss: 1.5},
		{Loss: -0.1},
		{Rate: -1},
		{QueueLimit: -1},
	}
	for _, l := range bad {
		if l.Validate() == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	if err := (Link{Delay: time.Second, Jitter: time.Millisecond, Loss: 0.01, Rate: 1e9}).Validate(); err != nil {
		t.Error(err)
	}
}
