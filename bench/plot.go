package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// cdfPoints returns at most max points of the empirical CDF of sorted
// latencies, x in µs: every sample's rank fraction, thinned evenly.
func cdfPoints(sorted []time.Duration, max int) plotter.XYs {
	n := len(sorted)
	step := 1
	if n > max {
		step = n / max
	}
	var pts plotter.XYs
	for i := 0; i < n; i += step {
		pts = append(pts, plotter.XY{X: float64(sorted[i].Nanoseconds()) / 1e3, Y: float64(i+1) / float64(n)})
	}
	if n > 0 && (n-1)%step != 0 {
		pts = append(pts, plotter.XY{X: float64(sorted[n-1].Nanoseconds()) / 1e3, Y: 1})
	}
	return pts
}

// lineColor is the i-th path's colour: plotutil's soft colours, whose sixth
// is too close to the first for a sixth path, then dark ones.
func lineColor(i int) color.Color {
	more := []color.Color{color.RGBA{40, 40, 40, 255}, color.RGBA{0, 140, 72, 255}, color.RGBA{150, 90, 20, 255}}
	if i < 5 {
		return plotutil.Color(i)
	}
	return more[(i-5)%len(more)]
}

// writePlot draws the latency CDF of every path, one panel per concurrency
// in rows (log-scale x, µs), side by side, and writes it as a PNG.
func writePlot(file string, rows [][]*Series) error {
	var panels []*plot.Plot
	for _, row := range rows {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("no-op call latency, %d caller(s)", row[0].Conc)
		p.X.Label.Text = "latency (µs, log scale)"
		p.Y.Label.Text = "fraction of calls ≤ x"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		// Room above 1 for the legend, so that it hides no curve.
		p.Y.Min, p.Y.Max = 0, 1.55
		p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"},
			{Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}})
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), -vg.Points(4)
		for i, s := range row {
			line, err := plotter.NewLine(cdfPoints(s.Lat, 600))
			if err != nil {
				return err
			}
			line.Color = lineColor(i)
			line.Width = vg.Points(1.6)
			line.Dashes = plotutil.Dashes(i)
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s: p50 %s, p99 %s", s.Path, fmtDur(s.P(0.5)), fmtDur(s.P(0.99))), line)
		}
		panels = append(panels, p)
	}
	const w, h = 16 * vg.Centimeter, 12 * vg.Centimeter
	img := vgimg.NewWith(vgimg.UseWH(w*vg.Length(len(panels)), h), vgimg.UseDPI(120))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Centimeter, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
