package lane

import (
	"testing"
	"time"
)

func TestAIMDSlowStartThenCut(t *testing.T) {
	a := newAIMD(0)
	now := time.Now()
	if got, want := a.slots(), ColdSlots; got != want {
		t.Fatalf("slots before any answer = %d, want %d", got, want)
	}
	// Slow start: one more per answer while the limit is used.
	for range 4 {
		a.answered(100*time.Millisecond, a.slots(), 0, now)
	}
	if got, want := a.limit, float64(DefaultInitialLimit+4); got != want {
		t.Fatalf("limit after 4 answers = %v, want %v", got, want)
	}
	// An idle lane does not grow.
	a.answered(100*time.Millisecond, 1, 0, now)
	if got, want := a.limit, float64(DefaultInitialLimit+4); got != want {
		t.Errorf("limit after an answer with 1 in flight = %v, want %v (unchanged)", got, want)
	}
	sent := now.Add(-50 * time.Millisecond)
	if !a.refused(sent, now, 6, 0) { // six in flight: more than the limit, no count
		t.Fatal("first refusal did not cut")
	}
	if got, want := a.limit, float64(DefaultInitialLimit+4)*backoffRatio; !near(got, want) {
		t.Fatalf("limit after a refusal = %v, want %v", got, want)
	}
	// Refusals of attempts sent before the cut were already accounted for.
	if a.refused(sent, now.Add(time.Millisecond), 1, 0) {
		t.Error("a refusal of an attempt sent before the cut cut again")
	}
	if !a.refused(now.Add(time.Millisecond), now.Add(2*time.Millisecond), 1, 0) {
		t.Error("a refusal of an attempt sent after the cut did not cut")
	}
	// Below one slot the limit keeps falling (the lane paces), to a floor.
	for i := range 20 {
		at := now.Add(time.Second + time.Duration(i)*time.Millisecond)
		a.refused(at, at, 1, 0)
	}
	if a.limit >= 0.1 || a.limit < minLimit || a.slots() != 1 {
		t.Errorf("limit after many refusals = %v (%d slots), want below 0.1, at least %v, one slot", a.limit, a.slots(), minLimit)
	}
	a.serviceE = 0.3
	if got, want := a.pace(), a.limit/0.3; !near(got, want) {
		t.Errorf("pace = %v, want limit ÷ service = %v", got, want)
	}
}

func TestAIMDProbesGentlyThenFaster(t *testing.T) {
	a := newAIMD(0)
	now := time.Now()
	a.limit = 10
	a.refused(now, now, 12, 0) // limit 5, refused at 10 (more in flight than the limit: no count)
	answers := func(n int, at time.Time) float64 {
		before := a.limit
		for range n {
			a.answered(100*time.Millisecond, a.slots(), 0, at)
		}
		return a.limit - before
	}
	// Far below where it was refused: back quickly.
	if got := answers(10, now); !near(got, 10*growFast) {
		t.Errorf("growth over 10 answers from 5 = %.3f, want %.3f", got, 10*growFast)
	}
	for a.limit < nearRefused*10 {
		answers(1, now)
	}
	// Just below the refusal point: gently.
	if got := answers(10, now); got <= 0 || got > 10*growSlow+1e-9 {
		t.Errorf("growth over 10 answers near the refusal point = %.4f, want gentle (0, %v]", got, 10*growSlow)
	}
	// At the refused level it stays for probeEvery, counted from reaching it.
	a.limit = 10
	reached := now.Add(time.Second)
	if got := answers(20, reached); got != 0 {
		t.Errorf("grew %.3f on reaching the refused level, want 0", got)
	}
	if got := answers(20, reached.Add(probeEvery/2)); got != 0 {
		t.Errorf("grew %.3f at the refused level within %s of reaching it, want 0", got, probeEvery)
	}
	// Beyond it, faster and faster: the capacity may have come back.
	first := answers(10, reached.Add(probeEvery+time.Millisecond))
	later := answers(10, reached.Add(5*probeEvery))
	if first <= 0 || later <= first {
		t.Errorf("growth beyond the refusal point: %.4f later after %.4f, want faster", later, first)
	}
	if a.limit > a.ceiling {
		t.Errorf("limit %v above the ceiling %v", a.limit, a.ceiling)
	}
	// Answers 1 ms apart, faster than 100 ms each at this limit: the
	// measured completion rate wins over Little's law.
	at := now.Add(5 * probeEvery)
	for i := range rateRing {
		a.answered(100*time.Millisecond, 0, 0, at.Add(time.Duration(i)*time.Millisecond))
	}
	at = at.Add(rateRing * time.Millisecond)
	if r, little := a.rate(at), a.limit/0.1; r <= little {
		t.Errorf("rate = %.1f, want above limit ÷ 100ms = %.1f (answers came back to back)", r, little)
	}
	b := newAIMD(0)
	b.answered(100*time.Millisecond, 1, 0, now)
	if r, want := b.rate(now), b.limit/0.1; !near(r, want) {
		t.Errorf("rate after one answer = %.1f, want limit ÷ 100ms = %.1f", r, want)
	}
}

// A lane that alone had k in flight when the k-th was refused knows the
// model takes k-1 of its attempts: it grows straight back to k-1, stays there
// longer before probing, and a refused probe returns it there (not to half)
// and doubles the wait before the next probe.
func TestAIMDCountedLevel(t *testing.T) {
	a := newAIMD(0)
	now := time.Now()
	a.answered(300*time.Millisecond, 1, 0, now)
	for a.limit < 5 {
		a.answered(300*time.Millisecond, a.slots(), 0, now)
	}
	if !a.refused(now, now, 5, 0) {
		t.Fatal("refusal with 5 in flight did not cut")
	}
	if !a.counted || a.refusedAt != 4 || !near(a.limit, 5*backoffRatio) {
		t.Fatalf("after the refusal: limit %.2f, level %.2f counted %v; want %.2f, 4, true", a.limit, a.refusedAt, a.counted, 5*backoffRatio)
	}
	at := now.Add(time.Millisecond)
	for range 100 {
		a.answered(300*time.Millisecond, a.slots(), 0, at)
	}
	if a.limit != 4 {
		t.Fatalf("limit after 100 answers = %.3f, want exactly the counted level 4", a.limit)
	}
	reached := at
	a.answered(300*time.Millisecond, a.slots(), 0, reached.Add(countedProbeWait-time.Millisecond))
	if a.limit != 4 {
		t.Fatalf("limit %.3f before countedProbeWait at the counted level, want 4", a.limit)
	}
	probe := reached.Add(countedProbeWait + probeEvery)
	a.answered(300*time.Millisecond, a.slots(), 0, probe)
	if a.limit <= 4 {
		t.Fatalf("limit %.3f after countedProbeWait, want a probe beyond 4", a.limit)
	}
	if !a.refused(probe, probe.Add(time.Millisecond), 5, 0) {
		t.Fatal("a refused probe did not count")
	}
	if a.limit != 4 || a.probeWait != 2*countedProbeWait {
		t.Errorf("after a refused probe: limit %.3f, probe wait %s; want 4 and %s", a.limit, a.probeWait, 2*countedProbeWait)
	}
	// A lane that never held three slots alone learns no count: a fleet's
	// share is an estimate.
	b := newAIMD(0)
	b.answered(300*time.Millisecond, 1, 0, now)
	b.limit = 1.4
	b.refused(now, now, 2, 0)
	if b.counted || b.refusedAt != 1.4 {
		t.Errorf("level %.2f counted %v after a refusal with 2 in flight, want 1.4 not counted", b.refusedAt, b.counted)
	}
}

// TestAIMDCutsWhatWasInFlight: a refusal cuts from what the lane had in
// flight, not from a limit it was not using (RFC 5681's FlightSize); refused
// with only its own attempt in the model, the lane shares it.
func TestAIMDCutsWhatWasInFlight(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		inflight      int
		limit, level  float64
		counted, shrd bool
	}{
		{1, 0.5, 1, false, true},  // the refused one alone: others fill the model
		{2, 1, 2, false, false},   // one more of its own: an estimate
		{4, 2, 3, true, false},    // three more of its own: the model took three
		{9, 2.5, 5, false, false}, // more than the limit (cut since): the limit
	} {
		a := newAIMD(0)
		a.answered(300*time.Millisecond, 1, 0, now)
		a.limit = 5 // slow start, from answers of a lane that used a slot or two
		a.refused(now, now, tt.inflight, 0)
		if !near(a.limit, tt.limit) || !near(a.refusedAt, tt.level) || a.counted != tt.counted || a.shared() != tt.shrd {
			t.Errorf("refused at limit 5 with %d in flight: limit %v, level %v, counted %v, shared %v; want %v, %v, %v, %v",
				tt.inflight, a.limit, a.refusedAt, a.counted, a.shared(), tt.limit, tt.level, tt.counted, tt.shrd)
		}
	}
}

func TestAIMDCeiling(t *testing.T) {
	a := newAIMD(3)
	for range 10 {
		a.answered(time.Millisecond, a.slots(), 0, time.Now())
	}
	if got, want := a.slots(), 3; got != want {
		t.Errorf("slots = %d, want the ceiling %d", got, want)
	}
}

// TestAIMDUrgency: of lanes that share a model at the same limit, one whose
// queue cannot be served before its deadline (urgency above one) grows
// faster and is cut less than one with time to spare; a lone sidecar's lane,
// refused at four, moves the same whatever its urgency.
func TestAIMDUrgency(t *testing.T) {
	now := time.Now()
	shared := func(limit float64) aimd {
		a := newAIMD(0)
		a.serviceE = 0.3
		a.cut, a.refusedAt, a.limit = true, limit, limit
		return a
	}
	calm, behind := shared(0.25), shared(0.25)
	calm.answered(300*time.Millisecond, 1, 0.2, now)
	behind.answered(300*time.Millisecond, 1, 3, now)
	if got, want := calm.limit, 0.25+growSlow/0.25*urgencyMin; !near(got, want) {
		t.Errorf("limit of a lane with time to spare after an answer = %v, want %v (additive growth at half weight)", got, want)
	}
	if got, want := behind.limit, 0.25+urgentGrow; !near(got, want) {
		t.Errorf("limit of a lane behind after an answer = %v, want %v (urgent growth)", got, want)
	}

	// Cut to what the backlog needs, between a quarter and a half; gentler
	// when behind.
	for _, tt := range []struct{ urgency, ratio float64 }{
		{0, sharedBackoff}, {0.1, sharedBackoff}, {0.4, 0.4}, {0.8, backoffRatio}, {1, backoffRatio},
		{2, 1 - backoffRatio/2}, {4, urgentBackoff},
	} {
		a := shared(0.4)
		a.refused(now, now, 1, tt.urgency)
		if got, want := a.limit, 0.4*tt.ratio; !near(got, want) {
			t.Errorf("limit of a shared lane at urgency %v after a refusal = %v, want %v", tt.urgency, got, want)
		}
	}

	lone := func() aimd {
		a := newAIMD(0)
		a.serviceE = 0.3
		a.cut, a.refusedAt, a.counted, a.limit = true, 4, true, 2
		return a
	}
	quiet, queued := lone(), lone()
	quiet.answered(300*time.Millisecond, 2, 0, now)
	queued.answered(300*time.Millisecond, 2, 5, now)
	if quiet.limit != queued.limit {
		t.Errorf("a lone lane's limit after an answer = %v with nothing queued, %v far behind; want the same", quiet.limit, queued.limit)
	}
	quiet.refused(now, now, 3, 0)
	queued.refused(now, now, 3, 5)
	if quiet.limit != queued.limit {
		t.Errorf("a lone lane's limit after a refusal = %v with nothing queued, %v far behind; want the same", quiet.limit, queued.limit)
	}
}

// TestAIMDColdRefusalPaces: a lane refused before its first answer paces at
// its limit over half the refusal's Retry-After (it knows no time per answer),
// and its limit stops at coldFloor.
func TestAIMDColdRefusalPaces(t *testing.T) {
	a := newAIMD(0)
	now := time.Now()
	if a.pace() != 0 {
		t.Fatalf("pace of a cold lane = %v, want 0 (unpaced)", a.pace())
	}
	for i := range 5 {
		at := now.Add(time.Duration(i) * time.Second)
		a.refused(at, at, 1, 0)
	}
	if a.limit != coldFloor {
		t.Errorf("limit of a cold lane after five refusals = %v, want the cold floor %v", a.limit, coldFloor)
	}
	if a.pace() != 0 {
		t.Errorf("pace without a Retry-After = %v, want 0", a.pace())
	}
	a.coldHold = 0.5 // the lane sets it from the hold: half a one-second Retry-After
	if got, want := a.pace(), coldFloor/0.5; !near(got, want) {
		t.Errorf("pace = %v, want limit ÷ half the Retry-After = %v", got, want)
	}
}

// TestAIMDGrowsBackToItsLevelAfterACalm: a lane cut below the level it was
// refused at, and not refused since, is back at that level within seconds:
// its growth doubles every probeEvery after the cut, as a probe's does,
// instead of creeping at growSlow near the level.
func TestAIMDGrowsBackToItsLevelAfterACalm(t *testing.T) {
	a := newAIMD(0)
	a.serviceE = 0.3
	a.cut, a.refusedAt, a.limit = true, 1, 1
	now := time.Now()
	a.refused(now, now, 1, 0) // shared, time to spare: cut to a quarter
	if a.limit >= 0.5 {
		t.Fatalf("limit after the refusal = %v, want a deep cut", a.limit)
	}
	at := now
	for a.limit < a.refusedAt && at.Sub(now) < 8*time.Second {
		at = at.Add(300 * time.Millisecond)
		a.answered(300*time.Millisecond, 1, 0, at)
	}
	if a.limit < a.refusedAt {
		t.Errorf("limit %.3f after %s of answers without a refusal, want back at the refused level %v", a.limit, at.Sub(now), a.refusedAt)
	}
}

// TestAIMDUrgentCutWithASlotOrTwo: a lane behind that held two slots when
// refused is cut as gently as a lane that shares the model below one slot;
// with time to spare it is halved, as ever.
func TestAIMDUrgentCutWithASlotOrTwo(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct{ urgency, want float64 }{{2, 1.2 * (1 - backoffRatio/2)}, {0.5, 1.2 * backoffRatio}} {
		a := newAIMD(0)
		a.serviceE = 0.3
		a.cut, a.refusedAt, a.limit = true, 1.2, 1.2
		a.refused(now, now, 2, tt.urgency)
		if !near(a.limit, tt.want) {
			t.Errorf("urgency %v: limit after a refusal with two in flight = %v, want %v", tt.urgency, a.limit, tt.want)
		}
	}
}

// TestAIMDRecoversWhatTheModelTookLately: a lane the model answered four at
// once, cut to one slot by a drop in its capacity, grows back quickly once
// recoverWait passes without a refusal (growFast per answer, up to four);
// after highMemory it probes as any lane does.
func TestAIMDRecoversWhatTheModelTookLately(t *testing.T) {
	now := time.Now()
	warm := func() aimd {
		a := newAIMD(0)
		for i := range 12 {
			a.answered(50*time.Millisecond, min(a.slots(), 4), 0, now.Add(time.Duration(i)*time.Millisecond))
		}
		a.refused(now, now.Add(20*time.Millisecond), 5, 0) // the fifth was refused: counted at four
		for range 3 {                                      // the drop: cut to a slot
			a.limit, a.lastCut = 1.2, a.lastCut.Add(time.Millisecond)
			a.refused(a.lastCut, a.lastCut, 2, 0)
		}
		return a
	}
	a := warm()
	if a.limit > 1.2 || a.high != 4 {
		t.Fatalf("after the drop: limit %v, high %v; want about one slot, and four remembered", a.limit, a.high)
	}
	at := a.lastCut.Add(recoverWait)
	for range 20 {
		at = at.Add(50 * time.Millisecond)
		a.answered(50*time.Millisecond, a.slots(), 0, at)
	}
	if a.limit < 2.5 {
		t.Errorf("limit %.2f after 1 s of answers without a refusal, %s after the drop; want back near the four the model took", a.limit, recoverWait)
	}
	b := warm()
	at = b.lastCut.Add(highMemory + time.Second)
	for range 20 {
		at = at.Add(50 * time.Millisecond)
		b.answered(50*time.Millisecond, b.slots(), 0, at)
	}
	if b.limit >= 2 {
		t.Errorf("limit %.2f after 1 s of answers, %s after the model last took four; want the usual probing", b.limit, highMemory)
	}
}
