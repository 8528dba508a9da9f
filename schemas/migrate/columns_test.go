package migrate_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas"
	"github.com/heliostat-dev/heliostat/schemas/schematest"
)

// TestGPUSamplesColumns checks the contract between the wire format and the
// table: every metric has a Nullable column named after it (absent is NULL,
// never 0), wide enough for the metric's maximum so that nothing is truncated
// on insert, and every Nullable column is a metric.
func TestGPUSamplesColumns(t *testing.T) {
	cfg, conn := schematest.Database(t)
	rows, err := conn.Query(context.Background(),
		"SELECT name, type FROM system.columns WHERE database = '"+cfg.Database+"' AND table = 'gpu_samples'")
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		cols[name] = typ
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cols) == 0 {
		t.Fatalf("%s.gpu_samples has no columns", cfg.Database)
	}

	maxOf := map[string]uint64{"UInt8": math.MaxUint8, "UInt16": math.MaxUint16, "UInt32": math.MaxUint32, "UInt64": math.MaxUint64}
	metrics := map[string]bool{}
	for m := range schemas.NumMetrics {
		name, info := m.String(), m.Info()
		metrics[name] = true
		typ, ok := cols[name]
		if !ok {
			t.Errorf("gpu_samples has no column %s for metric %d", name, m)
			continue
		}
		inner, ok := strings.CutPrefix(typ, "Nullable(")
		if !ok {
			t.Errorf("gpu_samples.%s is %s; want Nullable: an absent metric is NULL", name, typ)
			continue
		}
		inner = strings.TrimSuffix(inner, ")")
		if info.Float {
			if inner != "Float32" {
				t.Errorf("gpu_samples.%s is %s; want Nullable(Float32) for a ratio", name, typ)
			}
			continue
		}
		if max, ok := maxOf[inner]; !ok || max < info.Max {
			t.Errorf("gpu_samples.%s is %s; want an unsigned integer type that holds the metric's maximum %d", name, typ, info.Max)
		}
	}
	for name, typ := range cols {
		if strings.HasPrefix(typ, "Nullable(") && !metrics[name] {
			t.Errorf("gpu_samples.%s (%s) is Nullable but is no schemas.Metric", name, typ)
		}
	}
}
