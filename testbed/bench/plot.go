package bench

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// palette gives each protocol a stable colour.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// Plot writes, for every scenario, a CDF of first-response times per RTT
// (cdf-<scenario>-rtt<ms>.png/.svg) and a bar chart of the medians per
// protocol and RTT (bars-<scenario>.png/.svg) into dir. It returns the
// files written.
func (r *Report) Plot(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var protocols, scenarios []string
	var rtts []float64
	for _, res := range r.Results {
		if !slices.Contains(protocols, res.Protocol) {
			protocols = append(protocols, res.Protocol)
		}
		if !slices.Contains(scenarios, res.Scenario) {
			scenarios = append(scenarios, res.Scenario)
		}
		if !slices.Contains(rtts, res.RTTms) {
			rtts = append(rtts, res.RTTms)
		}
	}
	colour := func(p string) color.Color { return palette[slices.Index(protocols, p)%len(palette)] }
	var written []string
	save := func(p *plot.Plot, base string) error {
		for _, ext := range []string{".png", ".svg"} {
			f := filepath.Join(dir, base+ext)
			if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, f); err != nil {
				return fmt.Errorf("bench: saving %s: %w", f, err)
			}
			written = append(written, f)
		}
		return nil
	}
	for _, sc := range scenarios {
		for _, rtt := range rtts {
			p := plot.New()
			p.Title.Text = fmt.Sprintf("First response, RTT %s ms, DNS %s", fmtMs(rtt), sc)
			p.X.Label.Text = "time from start of DNS lookup to first response byte (ms)"
			p.Y.Label.Text = "fraction of connections"
			p.Y.Min, p.Y.Max = 0, 1
			p.X.Min = 0
			p.Legend.Top, p.Legend.Left = true, true
			for _, res := range r.Results {
				if res.Scenario != sc || res.RTTms != rtt || len(res.Samples) == 0 {
					continue
				}
				xs := make([]float64, len(res.Samples))
				for i, s := range res.Samples {
					xs[i] = float64(s.FirstByte) / float64(time.Millisecond)
				}
				slices.Sort(xs)
				pts := make(plotter.XYs, 0, 2*len(xs))
				for i, x := range xs {
					pts = append(pts, plotter.XY{X: x, Y: float64(i) / float64(len(xs))}, plotter.XY{X: x, Y: float64(i+1) / float64(len(xs))})
				}
				l, err := plotter.NewLine(pts)
				if err != nil {
					return written, fmt.Errorf("bench: %w", err)
				}
				l.Color = colour(res.Protocol)
				l.Width = vg.Points(1.5)
				p.Add(l)
				p.Legend.Add(res.Protocol, l)
			}
			p.Add(plotter.NewGrid())
			if err := save(p, fmt.Sprintf("cdf-%s-rtt%s", sc, fmtMs(rtt))); err != nil {
				return written, err
			}
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Median first response, DNS %s", sc)
		p.Y.Label.Text = "ms from start of DNS lookup"
		p.X.Label.Text = "client–server RTT (ms)"
		names := make([]string, len(rtts))
		for i, rtt := range rtts {
			names[i] = fmtMs(rtt)
		}
		p.NominalX(names...)
		w := vg.Points(float64(60) / float64(len(protocols)+1) * 2)
		var top float64
		for i, proto := range protocols {
			vals := make(plotter.Values, len(rtts))
			for j, rtt := range rtts {
				for _, res := range r.Results {
					if res.Scenario == sc && res.RTTms == rtt && res.Protocol == proto {
						vals[j] = res.FirstByte.Median
						top = max(top, vals[j])
					}
				}
			}
			b, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return written, fmt.Errorf("bench: %w", err)
			}
			b.Color = colour(proto)
			b.LineStyle.Width = 0
			b.Offset = w * vg.Length(float64(i)-float64(len(protocols)-1)/2)
			p.Add(b)
			p.Legend.Add(proto, b)
		}
		p.Y.Min, p.Y.Max = 0, top*1.35 // room for the legend
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		if err := save(p, "bars-"+sc); err != nil {
			return written, err
		}
	}
	return written, nil
}

func fmtMs(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
