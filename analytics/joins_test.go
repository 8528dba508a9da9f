package analytics

import (
	"io/fs"
	"testing"

	"github.com/heliostat-dev/heliostat/internal/sqlcheck"
)

// TestJoinAliases: every subquery or table function in a JOIN of the
// embedded SQL has an alias, on both sides. Current ClickHouse refuses one
// without (ALIAS_REQUIRED); 18.16, which the other tests run on, accepts it.
// Each file is read as written, so that a finding's line is the file's; the
// capacity queries are read again with their parts inlined, as they run.
func TestJoinAliases(t *testing.T) {
	err := fs.WalkDir(queryFS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(queryFS, path)
		if err != nil {
			return err
		}
		for _, f := range sqlcheck.UnaliasedJoins(string(b)) {
			t.Errorf("analytics/%s:%s", path, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range CapacityQueries() {
		for _, f := range sqlcheck.UnaliasedJoins(q.SQL) {
			t.Errorf("capacity query %s with its parts inlined, %s", q.Name, f)
		}
	}
}
