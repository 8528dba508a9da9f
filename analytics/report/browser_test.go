package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/analytics/report/reporttest"
)

// TestBrowser renders the sample report in headless Chromium and checks that
// every figure is there and drawn.
func TestBrowser(t *testing.T) {
	r := sample()
	var buf bytes.Buffer
	if err := Render(&buf, r); err != nil {
		t.Fatal(err)
	}
	reporttest.Check(t, buf.Bytes(), r.Figures(), t.TempDir())
}

// TestBrowserCatchesBlank checks that the browser check fails on a page
// whose figure draws nothing and on a page missing a figure.
func TestBrowserCatchesBlank(t *testing.T) {
	r := sample()
	var buf bytes.Buffer
	if err := Render(&buf, r); err != nil {
		t.Fatal(err)
	}
	// Empty the GPU-count figure: its <svg> element stays, with nothing in it.
	page := buf.String()
	svg := figureSVG(t, page, FigGPUCount)
	open := svg[:strings.Index(svg, ">")+1]
	page = strings.Replace(page, svg, open+"</svg>", 1)

	want := append(r.Figures(), "missing-figure")
	problems, err := reporttest.Problems(reporttest.Browser(t), []byte(page), want, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var blank, missing bool
	for _, p := range problems {
		blank = blank || strings.Contains(p, "figure "+FigGPUCount+" is blank")
		missing = missing || strings.Contains(p, "missing-figure")
	}
	if !blank || !missing || len(problems) != 2 {
		t.Errorf("Problems = %q; want the blank %s figure and the missing figure", problems, FigGPUCount)
	}
}
