package evalcmd

import "sort"

// Ratio is verified / static right answers to new wordings (ModeReport.
// NewRight), with a 95 % interval from a paired bootstrap: the new
// wordings are the same requests in both modes, so each resample draws
// wordings with replacement and counts both modes' right answers on the
// same draw.
type Ratio struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	// Resamples is the number of bootstrap resamples (0: no interval,
	// the modes saw different wordings or static answered none).
	Resamples int `json:"resamples"`
}

// bootstrapResamples is enough for the 2.5th and 97.5th percentiles to be
// stable in the second decimal of a ratio near 2.
const bootstrapResamples = 2000

// NewWordingRatio compares two modes' right answers to new wordings;
// seed fixes the resamples.
func NewWordingRatio(static, verified ModeReport, seed uint64) Ratio {
	if static.NewRight == 0 {
		return Ratio{}
	}
	r := Ratio{Value: float64(verified.NewRight) / float64(static.NewRight)}
	n := len(static.newRight)
	if n == 0 || n != len(verified.newRight) {
		return r
	}
	rng := newSplitMix(seed ^ 0x626f6f74)
	ratios := make([]float64, 0, bootstrapResamples)
	for range bootstrapResamples {
		s, v := 0, 0
		for range n {
			i := int(rng.float() * float64(n))
			if static.newRight[i] {
				s++
			}
			if verified.newRight[i] {
				v++
			}
		}
		if s > 0 {
			ratios = append(ratios, float64(v)/float64(s))
		}
	}
	if len(ratios) == 0 {
		return r
	}
	sort.Float64s(ratios)
	r.Low = ratios[int(0.025*float64(len(ratios)-1))]
	r.High = ratios[int(0.975*float64(len(ratios)-1))]
	r.Resamples = len(ratios)
	return r
}
