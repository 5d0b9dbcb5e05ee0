package evalcmd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/breakwater-dev/breakwater/lib/tty"
)

// progressBar draws one self-overwriting line on a terminal: stage, count,
// bar, rate and time left. It is hand-rolled (a carriage return and a
// throttle) rather than a dependency: that is all a two-stage batch job
// needs, and it keeps go.mod to what the sidecar itself uses. Off a
// terminal it draws nothing, so logs and pipes stay clean.
type progressBar struct {
	w       io.Writer // nil: silent
	stage   string
	started time.Time
	last    time.Time
	drawn   bool
}

func newProgressBar(w io.Writer) *progressBar {
	if !tty.IsTerminal(w) {
		return &progressBar{}
	}
	return &progressBar{w: w}
}

func (p *progressBar) update(stage string, done, total int) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if stage != p.stage {
		if p.drawn {
			fmt.Fprintln(p.w)
		}
		p.stage, p.started, p.drawn = stage, now, false
	} else if now.Sub(p.last) < 200*time.Millisecond && done < total {
		return
	}
	p.last = now
	const width = 30
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	fill := int(frac * width)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	elapsed := now.Sub(p.started).Seconds()
	eta := "?"
	rate := 0.0
	if elapsed > 0 && done > 0 {
		rate = float64(done) / elapsed
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r%-6s %7d/%-7d [%s] %3.0f%% %6.0f/s  left %-8s", stage, done, total, bar, 100*frac, rate, eta)
	p.drawn = true
}

func (p *progressBar) done() {
	if p.w != nil && p.drawn {
		fmt.Fprintln(p.w)
	}
}
