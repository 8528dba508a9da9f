package retention

import (
	"testing"
	"time"
)

func TestPartitionEnd(t *testing.T) {
	for _, tc := range []struct {
		p     string
		daily bool
		want  time.Time
		ok    bool
	}{
		{"20261121", true, time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), true},
		{"20261231", true, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"202612", false, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"tuple()", true, time.Time{}, false},
		{"202612", true, time.Time{}, false},
	} {
		got, ok := partitionEnd(tc.p, tc.daily)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("partitionEnd(%q, %v) = %v, %v; want %v, %v", tc.p, tc.daily, got, ok, tc.want, tc.ok)
		}
	}
}
