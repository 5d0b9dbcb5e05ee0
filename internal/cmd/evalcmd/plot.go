package evalcmd

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writePlot draws precision and recall against threshold, with and without
// the guard, as a PNG (or SVG/PDF, by path extension) at path.
func writePlot(path string, rep Report) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Semantic tier on %d pairs (%s)", rep.Pairs, rep.Embedder)
	p.X.Label.Text = "cosine threshold"
	p.Y.Label.Text = "precision / recall"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = true

	blue := color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange := color.RGBA{R: 255, G: 127, B: 14, A: 255}
	series := []struct {
		name   string
		rows   []Row
		recall bool
		col    color.Color
		dashed bool
	}{
		{"precision, guard", rep.WithGuard, false, blue, false},
		{"precision, no guard", rep.WithoutGuard, false, blue, true},
		{"recall, guard", rep.WithGuard, true, orange, false},
		{"recall, no guard", rep.WithoutGuard, true, orange, true},
	}
	for _, s := range series {
		pts := make(plotter.XYs, 0, len(s.rows))
		for _, r := range s.rows {
			y := r.Precision.Value
			if s.recall {
				y = r.Recall.Value
			}
			if !s.recall && r.Hits == 0 {
				continue // precision of no hits is undefined
			}
			pts = append(pts, plotter.XY{X: r.Threshold, Y: y})
		}
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("draw plot: %w", err)
		}
		line.Color = s.col
		line.Width = vg.Points(2)
		if s.dashed {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		p.Add(line)
		p.Legend.Add(s.name, line)
		if !s.recall && !s.dashed {
			if err := addBand(p, s.rows, s.col); err != nil {
				return err
			}
		}
	}
	p.Legend.ThumbnailWidth = vg.Points(30)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("save plot: %w", err)
	}
	return nil
}

// addBand draws the 95 % interval of the guarded precision as two thin lines.
func addBand(p *plot.Plot, rows []Row, col color.Color) error {
	var lo, hi plotter.XYs
	for _, r := range rows {
		if r.Hits > 0 {
			lo = append(lo, plotter.XY{X: r.Threshold, Y: r.Precision.Low})
			hi = append(hi, plotter.XY{X: r.Threshold, Y: r.Precision.High})
		}
	}
	if len(lo) == 0 {
		return nil
	}
	for i, pts := range []plotter.XYs{lo, hi} {
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("draw plot: %w", err)
		}
		l.Color = col
		l.Width = vg.Points(0.6)
		p.Add(l)
		if i == 0 {
			p.Legend.Add("precision 95 % interval, guard", l)
		}
	}
	return nil
}
