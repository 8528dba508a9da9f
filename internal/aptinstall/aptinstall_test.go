package aptinstall

import (
	"errors"
	"strings"
	"testing"
)

func TestInstall(t *testing.T) {
	fail := errors.New("exit status 100")
	tests := []struct {
		name    string
		root    bool
		noApt   bool
		results []error // one per apt-get call, in order
		want    []string
		wantErr string
		unavail bool
	}{
		{name: "installed at the first try", root: true, results: []error{nil},
			want: []string{"install -y -qq --no-install-recommends a b"}},
		{name: "stale lists: update, then install", root: true, results: []error{fail, nil, nil},
			want: []string{"install -y -qq --no-install-recommends a b", "update -qq", "install -y -qq --no-install-recommends a b"}},
		{name: "update fails", root: true, results: []error{fail, fail},
			want:    []string{"install -y -qq --no-install-recommends a b", "update -qq"},
			wantErr: "apt-get update: exit status 100: Reading package lists...\nE: output"},
		{name: "install fails after update", root: true, results: []error{fail, nil, fail},
			want:    []string{"install -y -qq --no-install-recommends a b", "update -qq", "install -y -qq --no-install-recommends a b"},
			wantErr: "apt-get install a b: exit status 100: Reading package lists...\nE: output"},
		{name: "not root", root: false, unavail: true, wantErr: "not root (as root: apt-get install a b)"},
		{name: "no apt-get", root: true, noApt: true, unavail: true, wantErr: "there is no apt-get (wanted: a b)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			a := Apt{
				Root: tt.root,
				LookPath: func(string) (string, error) {
					if tt.noApt {
						return "", errors.New("not found")
					}
					return "/usr/bin/apt-get", nil
				},
				Run: func(name string, args ...string) ([]byte, error) {
					if name != "/usr/bin/apt-get" {
						t.Errorf("ran %q, want the apt-get LookPath found", name)
					}
					calls = append(calls, strings.Join(args, " "))
					if len(calls) > len(tt.results) {
						t.Fatalf("apt-get call %d (%s) not expected", len(calls), args)
					}
					return []byte("Reading package lists...\nE: output\n"), tt.results[len(calls)-1]
				},
			}
			err := a.Install([]string{"--no-install-recommends"}, "a", "b")
			if strings.Join(calls, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("apt-get calls %q, want %q", calls, tt.want)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Install: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Install error %v, want one containing %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrUnavailable) != tt.unavail {
				t.Errorf("errors.Is(err, ErrUnavailable) = %v, want %v", !tt.unavail, tt.unavail)
			}
		})
	}
}

func TestInstallNothing(t *testing.T) {
	a := Apt{Run: func(string, ...string) ([]byte, error) {
		t.Fatal("apt-get ran for an empty package list")
		return nil, nil
	}}
	if err := a.Install(nil); err != nil {
		t.Fatalf("Install(): %v", err)
	}
}

func TestTail(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"short\n", 400, "short"},
		{"0123456789", 4, "6789"},
		{"line one\nE: line two\n", 12, "E: line two"},
		{"", 4, ""},
	} {
		if got := Tail([]byte(tt.in), tt.n); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
