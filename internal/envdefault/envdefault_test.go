package envdefault

import "testing"

func TestString(t *testing.T) {
	env := map[string]string{"HELIOSTAT_CLUSTER": "venus", "HELIOSTAT_EMPTY": ""}
	get := func(k string) string { return env[k] }
	tests := []struct {
		name   string
		getenv func(string) string
		key    string
		want   string
	}{
		{"set", get, "HELIOSTAT_CLUSTER", "venus"},
		{"unset", get, "HELIOSTAT_OTHER", "def"},
		{"empty", get, "HELIOSTAT_EMPTY", "def"},
		{"no environment", nil, "HELIOSTAT_CLUSTER", "def"},
	}
	for _, tt := range tests {
		if got := String(tt.getenv, tt.key, "def"); got != tt.want {
			t.Errorf("%s: String(%s) = %q; want %q", tt.name, tt.key, got, tt.want)
		}
	}
}
