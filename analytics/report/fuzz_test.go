package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRenderNames renders the sample report with an arbitrary string in
// every place a name from data goes (cluster, VC, user, flag, CDF series)
// and checks that it is always escaped: a name starting "zq<", "zq\"" or
// "zq&x" must never reach the page as written (the template has no such
// text), and the page keeps exactly its figures.
func FuzzRenderNames(f *testing.F) {
	for _, s := range []string{"", "x", "<script>alert(1)</script>", `" onload="alert(1)`, "&amp;", "</svg><svg>", "\xff\xfe", "]]><!--", "{{.Title}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := sample()
		want := len(r.Figures())
		for _, prefix := range []string{"zq<", `zq"`, "zq&x"} {
			name := prefix + s
			r.Clusters = []string{name}
			r.Notes = []string{name}
			r.DurationCDF[1].Name = name
			r.VCs[1].Name = name
			r.Users[0].Name = name
			r.Telemetry.Users[0].Name = name
			r.Telemetry.Flags = map[string]int64{name: 1}
			r.Summary[0].ID = name
			var buf bytes.Buffer
			if err := Render(&buf, r); err != nil {
				t.Fatalf("Render with name %q: %v", name, err)
			}
			page := buf.String()
			if strings.Contains(page, prefix) {
				t.Fatalf("name %q reached the page unescaped", name)
			}
			if n := strings.Count(page, "<svg "); n != want {
				t.Fatalf("name %q: page has %d figures; want %d", name, n, want)
			}
			if !utf8.ValidString(page) {
				t.Fatalf("name %q: page is not valid UTF-8", name)
			}
		}
	})
}
