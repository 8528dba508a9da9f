// Package reporttest checks a rendered report in a real browser: headless
// Chromium (Debian's chromium package, installed by `make deps`) parses the
// page and draws its figures to PNG, and the test checks that every figure is
// there and not blank.
package reporttest

import (
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Browser returns the Chromium executable, failing the test with what to
// install when there is none.
func Browser(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium is missing: run `make deps` (as root it installs Debian's chromium) or `sudo apt-get install chromium`")
	return ""
}

// chromium runs the browser headless with args, in its own profile
// directory, and returns its stdout.
func chromium(browser, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := []string{"--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--mute-audio",
		"--disable-extensions", "--disable-dev-shm-usage", "--user-data-dir=" + filepath.Join(dir, "profile")}
	if os.Geteuid() == 0 {
		base = append(base, "--no-sandbox") // Chromium refuses to run as root with its sandbox
	}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", browser, strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

var svgOpen = regexp.MustCompile(`<svg[^>]*\sdata-figure="([^"]+)"[^>]*>`)
var sizeAttr = regexp.MustCompile(`\s(width|height)="(\d+)"`)

// figure is one <svg data-figure> element of a page.
type figure struct {
	id   string
	svg  string
	w, h int
}

func figures(page string) ([]figure, error) {
	var out []figure
	for _, m := range svgOpen.FindAllStringSubmatchIndex(page, -1) {
		end := strings.Index(page[m[0]:], "</svg>")
		if end < 0 {
			return nil, fmt.Errorf("figure %s: <svg> not closed", page[m[2]:m[3]])
		}
		f := figure{id: page[m[2]:m[3]], svg: page[m[0] : m[0]+end+len("</svg>")]}
		for _, a := range sizeAttr.FindAllStringSubmatch(page[m[0]:m[1]], -1) {
			v, _ := strconv.Atoi(a[2])
			if a[1] == "width" {
				f.w = v
			} else {
				f.h = v
			}
		}
		if f.w == 0 || f.h == 0 {
			return nil, fmt.Errorf("figure %s: <svg> without a fixed width and height", f.id)
		}
		out = append(out, f)
	}
	return out, nil
}

// Check renders page (a whole HTML document) in headless Chromium and fails
// t with every problem Problems finds. It keeps the browser's files under
// dir.
func Check(t testing.TB, page []byte, want []string, dir string) {
	t.Helper()
	problems, err := Problems(Browser(t), page, want, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// Problems renders page (a whole HTML document) with browser and says what
// is wrong with it:
//   - the browser's DOM must hold exactly the <svg data-figure> elements
//     named by want, in that order (the HTML parser swallowed none);
//   - the whole page must draw to a non-blank PNG;
//   - each figure, drawn on its own at a known place, must cover its box with
//     visible pixels, some of them in colour (data marks use the palette;
//     axes and text are grey).
//
// It writes page.html, page.png, figures.html and figures.png under dir. The
// error is for a browser that could not run.
func Problems(browser string, page []byte, want []string, dir string) ([]string, error) {
	var problems []string
	pagePath := filepath.Join(dir, "page.html")
	if err := os.WriteFile(pagePath, page, 0o644); err != nil {
		return nil, err
	}
	url := "file://" + pagePath

	// 1. The DOM as Chromium parsed it.
	dom, err := chromium(browser, dir, "--dump-dom", url)
	if err != nil {
		return nil, err
	}
	var got []string
	for _, m := range svgOpen.FindAllStringSubmatch(string(dom), -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		problems = append(problems, fmt.Sprintf("figures in Chromium's DOM: %v; want %v", got, want))
	}

	// 2. The whole page.
	shot := filepath.Join(dir, "page.png")
	if _, err := chromium(browser, dir, "--screenshot="+shot, "--window-size=900,3000", url); err != nil {
		return nil, err
	}
	img, err := readPNG(shot)
	if err != nil {
		return nil, err
	}
	if n := countPixels(img, img.Bounds(), notBackground); n < 10000 {
		problems = append(problems, fmt.Sprintf("page screenshot is blank: %d drawn pixels", n))
	}

	// 3. Each figure in a box of its own, stacked at known places.
	figs, err := figures(string(page))
	if err != nil {
		return append(problems, err.Error()), nil
	}
	if len(figs) == 0 {
		return append(problems, "page has no figures"), nil
	}
	const gap = 20
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0;background:#fff}div{position:absolute;left:0}svg{display:block}</style></head><body>`)
	y, width := 0, 0
	boxes := make([]image.Rectangle, len(figs))
	for i, f := range figs {
		fmt.Fprintf(&b, `<div style="top:%dpx;width:%dpx;height:%dpx">%s</div>`, y, f.w, f.h, f.svg)
		boxes[i] = image.Rect(0, y, f.w, y+f.h)
		y += f.h + gap
		width = max(width, f.w)
	}
	b.WriteString(`</body></html>`)
	harness := filepath.Join(dir, "figures.html")
	if err := os.WriteFile(harness, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	shot = filepath.Join(dir, "figures.png")
	if _, err := chromium(browser, dir, "--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", width, y), "file://"+harness); err != nil {
		return nil, err
	}
	if img, err = readPNG(shot); err != nil {
		return nil, err
	}
	if !img.Bounds().Size().Eq(image.Pt(width, y)) {
		return append(problems, fmt.Sprintf("figures screenshot is %v; want %dx%d", img.Bounds().Size(), width, y)), nil
	}
	for i, f := range figs {
		box := boxes[i]
		drawn := countPixels(img, box, notWhite)
		colour := countPixels(img, box, colourful)
		area := box.Dx() * box.Dy()
		// A chart with data: grid, labels and marks cover well over 1% of
		// its box, and its marks put hundreds of coloured pixels on it.
		if drawn < area/100 || colour < 300 {
			problems = append(problems, fmt.Sprintf("figure %s is blank in Chromium: %d drawn and %d coloured pixels of %d", f.id, drawn, colour, area))
		}
	}
	return problems, nil
}

func readPNG(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("chromium wrote no screenshot: %w", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return img, nil
}

func countPixels(img image.Image, r image.Rectangle, keep func(r, g, b uint32) bool) int {
	n := 0
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if keep(cr>>8, cg>>8, cb>>8) {
				n++
			}
		}
	}
	return n
}

func notWhite(r, g, b uint32) bool { return r < 245 || g < 245 || b < 245 }

// notBackground is anything but white and the page's background (#f6f6f4).
func notBackground(r, g, b uint32) bool {
	return notWhite(r, g, b) && !(r >= 240 && g >= 240 && b >= 238)
}

// colourful is a pixel whose channels differ by more than grey text or
// anti-aliased grey lines do.
func colourful(r, g, b uint32) bool {
	return max(r, g, b)-min(r, g, b) > 48
}
