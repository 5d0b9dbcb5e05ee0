package lane

import (
	"math"
	"time"
)

// Adaptive concurrency defaults. The limit starts small and finds the
// upstream's capacity at run time; MaxConcurrency is only its ceiling.
const (
	// DefaultInitialLimit is a lane's concurrency limit once its first
	// answer came: one. Slow start then doubles it every round trip, so a
	// lone sidecar reaches 16 in four round trips, while a fleet of
	// sidecars, each with a lane of its own in front of one model, starts
	// with one request each in flight (at four each, six sidecars in front
	// of a model that takes four refused each other for seconds: 72
	// upstream 429s and one replica at 66 % of the others' answers, against
	// 42 and 91 % from one).
	DefaultInitialLimit = 1
	// ColdSlots is how many attempts a lane lets through before its first
	// answer, when it knows nothing yet: one slow first answer must not
	// hold every other request of a cold lane.
	ColdSlots = 4
	// DefaultMaxConcurrency is the ceiling of every lane's adaptive limit and
	// of an upstream's attempts in flight when none is configured.
	DefaultMaxConcurrency = 256
	// DefaultMaxQueue is how many requests may wait for a slot of one lane
	// (and of one pool) when none is configured. The wait a request is
	// expected to have, not this bound, is what normally sheds it.
	DefaultMaxQueue = 1024
	// DefaultRetryAfterCap bounds how long an upstream's Retry-After or
	// rate-limit reset can hold a lane back.
	DefaultRetryAfterCap = 5 * time.Minute
)

// The limit is a number of slots that may be fractional, down to minLimit
// (one send every 16 answers' time: lower, a lane that lost its share in a
// run of refusals took minutes to come back): at 0.25 a lane
// keeps one request in flight a quarter of the time. Every lane paces its
// sends at limit ÷ time per answer (a token bucket, lane.go), so a sidecar
// that shares a model with others spreads its calls in time and holds no
// slot it is not using: six sidecars in front of a model that takes four
// settle near two thirds of a slot each. Below one slot such a lane sends in
// chains of chainLen (lane.go): one send that may find the model full, then
// the next into the slot its own answer frees. A limit of one would keep six in
// flight, and every one beyond four is refused.
//
// How the limit moves, per answer of a busy lane (one using at least half of
// its limit) and per refusal:
//   - slow start, until the first refusal: +1 per answer, so the limit
//     doubles every round trip;
//   - a refusal multiplies what the lane had in flight (at most its limit)
//     by backoffRatio, at most once per round trip (only refusals of
//     attempts sent after the last cut count, as TCP's fast recovery does),
//     and remembers a level (as TCP CUBIC's W_max): what it had in flight, or
//     the count of attempts the model took when the lane alone held three
//     slots or more (see refused). A lane refused with only the refused
//     attempt in flight is at one slot or less: it shares the model;
//   - below nearRefused of that level, or below a counted level, the limit
//     grows back quickly (growFast per answer);
//   - between there and the level it grows gently, growSlow per answer
//     (multiplicative per unit of time, so a fleet of N sidecars probes the
//     model about as often as one does); when the level is below one slot
//     (the model is shared) growSlow ÷ limit per answer, which is additive
//     per unit of time: AIMD, whose shares converge (Chiu and Jain 1989);
//   - at the level it stays for probeWait after reaching it (probeEvery, or
//     countedProbeWait for a counted level), then grows beyond it, the growth
//     doubling every probeEvery without a refusal, so a model whose capacity
//     came back is found again within seconds.
//
// Refusals at a given level come at random to whichever sidecar sends when
// the model is full, so a sidecar holding more of the model is refused more
// often: the limits of sidecars that see the same load converge.
//
// They converge slowly, though, and not always: a sidecar whose next request
// goes out the moment its own answer frees the slot is almost never refused,
// while one that sends at other times finds the model full (per-lane traces of
// twelve sidecars: lanes that lost the first seconds sat at the floor for
// half a minute, and their requests reached the deadline while others had
// answered all of theirs). So a lane that shares the model also weighs its
// own backlog, its urgency (lane.urgency: the time to send every waiting
// request at its rate, over the time the newest one has left; above one, the
// queue cannot be served before the deadline):
//   - below one slot, its additive growth is multiplied by the urgency
//     (between urgencyMin and urgencyMax), and goes on at the refused level
//     instead of waiting there: a lane with time to spare yields growth to one
//     without;
//   - an urgent lane below one slot, or refused at one slot or less, grows by
//     up to urgentGrow per answer (from the floor, doubling within an answer
//     or two), so the capacity that lanes with empty queues leave is taken
//     within seconds, not the minutes additive growth needs from the floor;
//   - an urgent lane's cut is gentler, 1 − backoffRatio ÷ urgency (at most
//     urgentBackoff): the weighted decrease of weighted AIMD, whose shares
//     converge to the weights rather than to equal rates, so lanes' backlogs,
//     and with them their answers, converge;
//   - a lane with time to spare is cut to the share its backlog needs: by
//     its urgency, between sharedBackoff and backoffRatio (at urgency 0.3,
//     to 0.3 of its limit, where the urgency becomes one). Twelve sidecars
//     whose lanes all halved refused about 95 sends a run, near the quarter
//     of going straight's refusals that is the target; cutting lanes with
//     time to spare deeper brought it to 76–94, and the model's spare
//     capacity went to the lanes behind;
//   - when a Retry-After hold ends, it sends one to two pacing gaps later, at
//     a random phase (lane.restartBucket), so sidecars refused together do
//     not all come back together.
//
// A lane refused before its first answer has no time per answer to pace by:
// it paces at its limit ÷ half the refusal's Retry-After, down to coldFloor,
// instead of sending unpaced at every end of a hold (twelve cold sidecars
// refused each other in rounds, one at each end of a one-second hold: 44 of
// a run's 123 refusals came in its first five seconds).
const (
	backoffRatio = 0.5
	nearRefused  = 0.85
	growFast     = 0.1
	growSlow     = 0.003
	minLimit     = 1.0 / 16
	probeEvery   = 2 * time.Second
	// A level the lane counted is probed first after countedProbeWait, then
	// after twice as long each time a probe is refused, up to maxProbeWait.
	countedProbeWait = 8 * time.Second
	maxProbeWait     = 32 * time.Second

	urgencyMin    = 0.5
	urgencyMax    = 8
	urgentGrow    = 0.2
	urgentBackoff = 0.85
	sharedBackoff = 0.25
	coldFloor     = 0.25

	// What the model answered at once is remembered for highMemory
	// (three or more, within the lane's own slots, after the cold burst:
	// a fleet's lanes rarely hold three, and a lone lane's few beyond its
	// limit, or a gated lane's beyond its share, say nothing of the
	// model), and grown back to once recoverWait passes without a refusal.
	highMemory  = 10 * time.Second
	recoverWait = 500 * time.Millisecond
)

// aimd is one lane's adaptive concurrency limit. It is not safe for concurrent
// use: the lane's mutex guards it.
type aimd struct {
	limit     float64
	ceiling   float64
	cut       bool                // a refusal has been seen: slow start is over
	lastCut   time.Time           // when the limit was last cut
	refusedAt float64             // the level the last cut remembers (CUBIC's W_max)
	counted   bool                // refusedAt is a count of slots the model took from this lane alone
	beyond    time.Time           // when the limit reached refusedAt; zero below it
	probeWait time.Duration       // how long the limit stays at refusedAt before probing beyond it
	serviceE  float64             // EWMA of answered attempts' durations, seconds; 0 = none yet
	serviceHi float64             // their upper envelope: up at once, down slowly; seconds
	coldHold  float64             // before the first answer, half the last refusal's Retry-After: the time it paces by; seconds
	high      float64             // the most attempts the model answered at once lately (3 or more), see answered
	highAt    time.Time           // when the lane last had high answered at once
	recent    [rateRing]time.Time // when the last answers came, a ring
	next, n   int
}

// rateRing is how many recent answers the measured completion rate spans.
const rateRing = 32

func newAIMD(ceiling int) aimd {
	if ceiling <= 0 {
		ceiling = DefaultMaxConcurrency
	}
	return aimd{limit: min(DefaultInitialLimit, float64(ceiling)), ceiling: float64(ceiling), probeWait: probeEvery}
}

// slots is how many attempts may be in flight: the limit rounded up, so a
// fractional limit still lets one through (the pacing spreads them), and
// ColdSlots before the first answer or refusal.
func (a *aimd) slots() int {
	n := max(int(math.Ceil(a.limit-1e-9)), 1)
	if a.serviceE == 0 && !a.cut {
		n = max(n, min(ColdSlots, int(a.ceiling))) // cold: nothing learnt yet
	}
	return n
}

// answered records an answer that took d. inflight is how many attempts were
// in flight when it came back, this one included: the limit only grows while
// it is used, so an idle lane does not inflate it.
//
// urgency is the lane's (see lane.urgency); 0 when nothing waits.
func (a *aimd) answered(d time.Duration, inflight int, urgency float64, now time.Time) {
	a.recent[a.next] = now
	a.next = (a.next + 1) % rateRing
	a.n = min(a.n+1, rateRing)
	const alpha = 0.2
	s := d.Seconds()
	if a.serviceE == 0 {
		a.serviceE = s
	} else {
		a.serviceE += alpha * (s - a.serviceE)
	}
	if s >= a.serviceHi {
		a.serviceHi = s
	} else {
		a.serviceHi += alpha / 4 * (s - a.serviceHi)
	}
	if n := float64(inflight); n >= 3 && n <= float64(a.slots()) && a.n > ColdSlots && (n >= a.high || now.Sub(a.highAt) > highMemory) {
		a.high, a.highAt = n, now
	}
	if float64(inflight)*2 < a.limit {
		return
	}
	var inc float64
	switch {
	case !a.cut:
		inc = 1
	case a.limit < a.refusedAt:
		a.beyond = time.Time{}
		switch {
		case a.counted, a.limit < nearRefused*a.refusedAt:
			// Back quickly to a level the model took (counted), or to near
			// where it refused.
			inc = min(growFast, a.refusedAt-a.limit)
		case a.refusedAt <= 1:
			// Refused below one slot: the model is shared. Additive per
			// unit of time (plain AIMD), so a lane with a small share
			// grows as fast as a larger one and shares converge.
			inc = growSlow / a.limit * urgencyWeight(urgency)
		default:
			inc = growSlow
		}
		if since := now.Sub(a.lastCut) - a.probeWait; since > 0 {
			// Long since the cut, and still below the level: grow back to
			// it as a probe does, the growth doubling every probeEvery (the
			// level's own plateau and probes come after), as CUBIC's
			// window is a function of the time since the last reduction
			// (RFC 9438 §4.2). Three sidecars in front of a model that takes
			// four each crept from 0.9 towards their refused level of one
			// slot at growSlow for 18 s, leaving the fourth slot idle (149–164
			// answers to clients that give up after 3 s, straight 189).
			inc = max(inc, min(a.probeGrowth(since, urgency), a.refusedAt-a.limit))
		}
	default:
		// At the refused level it stays for probeWait (CUBIC's plateau),
		// then probes beyond it, faster and faster without a refusal: the
		// model's capacity may have come back.
		if a.beyond.IsZero() {
			a.beyond = now
		}
		since := now.Sub(a.beyond)
		if a.refusedAt <= 1 {
			// Shared: additive growth goes on at the level too, so a lane
			// refused at the floor climbs at its urgency's pace.
			inc = growSlow / a.limit * urgencyWeight(urgency)
		}
		if since < a.probeWait {
			break
		}
		if a.limit >= a.refusedAt+1 {
			a.probeWait = probeEvery // a whole slot more was taken: probe as usual
		}
		inc = max(inc, a.probeGrowth(since-a.probeWait, urgency))
	}
	if a.cut && !a.shared() && a.limit < a.high && now.Sub(a.highAt) <= highMemory && now.Sub(a.lastCut) >= recoverWait {
		// The model answered high of the lane's attempts at once lately,
		// and has refused nothing for recoverWait: its capacity may be back
		// (a drop that passed), and the lane grows back to high quickly. A
		// lone sidecar in front of a model that fell from four slots to one
		// for a second crept back at growSlow below the level the drop
		// taught it: 1.3 slots 6 s after the model had its four again.
		inc = max(inc, min(growFast, a.high-a.limit))
	}
	if a.cut && (a.refusedAt <= 1 || a.limit < 1) && urgency > 1 {
		// Behind: its queue cannot be served before the deadline at this
		// rate. Multiplicative per unit of time, up to urgentGrow per answer
		// at twice behind.
		inc = max(inc, urgentGrow*min(urgency-1, 1))
	}
	a.limit = min(a.limit+inc, a.ceiling)
}

// probeGrowth is the growth per answer of a lane probing for capacity
// after since without a refusal: growSlow, doubling every probeEvery, never
// faster than slow start.
func (a *aimd) probeGrowth(since time.Duration, urgency float64) float64 {
	doublings := min(float64(since/probeEvery), 16)
	probe := growSlow * math.Pow(2, doublings) / min(a.limit, 1)
	if a.refusedAt <= 1 {
		probe *= urgencyWeight(urgency)
	}
	return min(probe, 1)
}

// refused records a congestion signal for an attempt sent at sent, with
// inflight attempts of the lane in flight (this one included); it reports
// whether the limit was cut.
//
// The level it remembers is the limit, or, when the lane alone held at least
// three slots, one fewer than it had in flight: the model took that many of
// this lane's attempts and refused the next, a count rather than an estimate,
// so the limit grows straight back to it. A refused probe beyond such a level
// goes back to it instead of halving, and waits twice as long before the next
// probe (up to maxProbeWait): a lone sidecar in front of a model that takes
// four does not lose half its answers every few seconds to find that out
// again.
func (a *aimd) refused(sent, now time.Time, inflight int, urgency float64) bool {
	if a.cut && sent.Before(a.lastCut) {
		return false // sent before the last cut, which already accounted for it
	}
	switch {
	case a.cut && a.counted && a.limit > a.refusedAt && !a.beyond.IsZero():
		a.limit = a.refusedAt
		a.probeWait = min(2*a.probeWait, maxProbeWait)
	default:
		// The level is what the lane had in flight, not its limit, as TCP
		// halves its flight size rather than a window it was not using
		// (RFC 5681, section 3.1, equation 4).
		used := min(a.limit, float64(inflight))
		a.refusedAt, a.counted = used, false
		if held := float64(inflight - 1); held >= 2 && held < a.limit+1 {
			a.refusedAt, a.counted = min(a.limit, held), true
		}
		ratio, floor := backoffRatio, minLimit
		switch {
		case (a.shared() || used <= 2 && !a.counted) && urgency > 1:
			// Behind, with a slot or two: the gentle cut of a lane that
			// shares the model. Three sidecars share four slots at 1.33
			// each; halved at every refusal above one slot, each gave up
			// half a slot every two seconds (170–182 answers for clients
			// that give up after 3 s, against 191–198 with this).
			ratio = min(1-backoffRatio/urgency, urgentBackoff)
		case a.shared():
			ratio = min(max(urgency, sharedBackoff), backoffRatio)
		}
		if a.serviceE == 0 {
			floor = coldFloor // paced by a Retry-After, not an answer's time: no lower
		}
		a.limit = max(used*ratio, floor)
		a.probeWait = probeEvery
		if a.counted {
			a.probeWait = countedProbeWait
		}
	}
	a.cut, a.lastCut, a.beyond = true, now, time.Time{}
	return true
}

// seed starts a lane that has neither answered nor been refused at limit,
// past slow start, as if a refusal had taught it that level (the fleet's
// estimate: see Set.Seed); perAnswer, when known (> 0), is the fleet's time
// per answer, so the lane paces from its first send.
func (a *aimd) seed(limit float64, perAnswer time.Duration) {
	if limit <= 0 || a.cut || a.serviceE != 0 {
		return
	}
	a.limit = min(max(limit, minLimit), a.ceiling)
	a.cut, a.refusedAt = true, a.limit
	if perAnswer > 0 {
		a.serviceE, a.serviceHi = perAnswer.Seconds(), perAnswer.Seconds()
	}
}

// capAt holds the limit at most c (a share of the fleet's capacity gate,
// see Lane.Cap), and takes c as a counted level (as refused does when the
// lane alone counted the slots the model took), so that, the gate gone,
// the lane goes on from its share: it grows back to c quickly, and probes
// beyond it only after countedProbeWait. A lane still in slow start below
// c is left to it. It reports whether the limit moved.
func (a *aimd) capAt(c float64) bool {
	c = min(max(c, minLimit), a.ceiling)
	if a.limit <= c && !a.cut {
		return false
	}
	moved := a.limit > c
	if moved {
		a.limit, a.beyond = c, time.Time{}
	}
	a.high = 0 // the share is the level, not what the model took before the gate
	if !a.cut || !a.counted || a.refusedAt != c {
		a.cut, a.refusedAt, a.counted, a.probeWait = true, c, true, countedProbeWait
		if a.limit < c {
			a.beyond = time.Time{}
		}
	}
	return moved
}

// service is the measured time per answer; 0 when nothing was answered yet.
func (a *aimd) service() time.Duration { return time.Duration(a.serviceE * float64(time.Second)) }

// serviceLong is how long an answer takes at most, nearly: the upper
// envelope of the measured times, which rises to a slow answer at once and
// falls back slowly.
func (a *aimd) serviceLong() time.Duration { return time.Duration(a.serviceHi * float64(time.Second)) }

// pace is the rate at which the lane sends, in attempts per second: its
// limit over the time per answer (Little's law). Before the first answer it
// is the limit over the last refusal's Retry-After, the one time the lane has
// learnt, and 0 (no pacing) without one.
func (a *aimd) pace() float64 {
	if a.serviceE <= 0 {
		if a.coldHold > 0 {
			return a.limit / a.coldHold
		}
		return 0
	}
	return a.limit / a.serviceE
}

// belowOne is pace() while the limit is below one slot, 0 otherwise: the
// rate stats show for a lane that shares its model with others.
func (a *aimd) belowOne() float64 {
	if a.limit >= 1 {
		return 0
	}
	return a.pace()
}

// rate is the measured service rate in answers per second: the faster of
// the rate at the current limit by Little's law (limit ÷ time per answer) and
// the rate at which the last answers came. The faster one, because a request
// admitted on an optimistic estimate still leaves the queue with a 429 before
// its deadline, while one refused on a pessimistic one is lost. 0 when
// unknown.
func (a *aimd) rate(now time.Time) float64 {
	r := a.pace()
	if r <= 0 {
		return 0
	}
	if a.n >= 8 {
		newest := a.recent[(a.next+rateRing-1)%rateRing]
		oldest := a.recent[(a.next+rateRing-a.n)%rateRing]
		if span := newest.Sub(oldest).Seconds(); span > 0 && now.Sub(newest) < 2*time.Second {
			r = max(r, float64(a.n-1)/span)
		}
	}
	return r
}

// shared reports whether the model refused the lane at one slot or less: it
// shares the model with others.
func (a *aimd) shared() bool { return a.cut && a.refusedAt <= 1 }

// urgencyWeight is what a shared lane's additive growth is multiplied by.
func urgencyWeight(u float64) float64 { return min(max(u, urgencyMin), urgencyMax) }
