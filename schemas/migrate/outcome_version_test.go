package migrate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/schemas/migrate"
)

// TestOutcomeVersionComment: after 0028 prediction_outcomes' version column
// says its rule (the run's event version, not the write time) where
// DESCRIBE and system.columns show it, and applying 0028 again changes
// nothing.
func TestOutcomeVersionComment(t *testing.T) {
	db, conn := emptyDatabase(t)
	ctx := context.Background()
	migs, at := applyBefore(t, conn, db, 28, "prediction_outcome_version")
	comment := func() string {
		t.Helper()
		got := queryStrings(t, conn, "SELECT comment FROM system.columns WHERE database = '"+db+"' AND table = 'prediction_outcomes' AND name = 'version'")
		if len(got) != 1 {
			t.Fatalf("prediction_outcomes.version: %d columns", len(got))
		}
		return got[0]
	}
	if c := comment(); c != "" {
		t.Fatalf("premise: version's comment before 0028 = %q; want none", c)
	}
	if _, err := migrate.ApplyMigrations(ctx, conn, db, migs[:at+1], discard); err != nil {
		t.Fatalf("apply 0028: %v", err)
	}
	want := "The version of the run's latest event"
	if c := comment(); !strings.HasPrefix(c, want) {
		t.Errorf("version's comment after 0028 = %q; want it to start %q", c, want)
	}
	applyAgain(t, conn, migs[at])
	if c := comment(); !strings.HasPrefix(c, want) {
		t.Errorf("version's comment after 0028 ran twice = %q", c)
	}
}
