package api

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/heliostat-dev/heliostat/internal/testpki"
)

func TestTLSConfigErrors(t *testing.T) {
	p := testpki.New(t)
	tests := []struct {
		name    string
		cfg     Config
		want    string // "" for a nil config and no error
		invalid bool   // Validate refuses it too (it reads no file)
	}{
		{"none", Config{}, "", false},
		{"cert without key", Config{TLSCertFile: p.CertFile}, "go together", true},
		{"client CA without cert", Config{TLSClientCAFile: p.CAFile}, "needs --actuator.tls.cert", true},
		{"key of another certificate", Config{TLSCertFile: p.CertFile, TLSKeyFile: p.ClientKeyFile}, "--actuator.tls.cert " + p.CertFile, false},
		{"missing cert", Config{TLSCertFile: p.Dir + "/nope.crt", TLSKeyFile: p.KeyFile}, "no such file", false},
		{"client CA without certificates", Config{TLSCertFile: p.CertFile, TLSKeyFile: p.KeyFile, TLSClientCAFile: p.KeyFile}, "no PEM certificate", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.TLSConfig(time.Now, slog.New(slog.DiscardHandler))
			if tc.want == "" {
				if err != nil || got != nil {
					t.Fatalf("TLSConfig = %v, %v; want nil, nil", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("TLSConfig error %v; want one containing %q", err, tc.want)
			}
			if verr := tc.cfg.Validate(); (verr != nil) != tc.invalid {
				t.Errorf("Validate = %v; want an error: %v", verr, tc.invalid)
			}
		})
	}
}
