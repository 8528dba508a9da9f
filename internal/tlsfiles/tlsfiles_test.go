package tlsfiles_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/heliostat-dev/heliostat/internal/testpki"
	"github.com/heliostat-dev/heliostat/internal/tlsfiles"
)

func TestClientConfig(t *testing.T) {
	p := testpki.New(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("-----BEGIN NOTHING-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    tlsfiles.Client
		want string // error substring; "" for success
	}{
		{"system CAs", tlsfiles.Client{Prefix: "--x.tls"}, ""},
		{"CA and client certificate", tlsfiles.Client{Prefix: "--x.tls", CAFile: p.CAFile, CertFile: p.ClientCertFile, KeyFile: p.ClientKeyFile}, ""},
		{"missing CA", tlsfiles.Client{Prefix: "--x.tls", CAFile: garbage + ".missing"}, "--x.tls.ca: open " + garbage + ".missing"},
		{"CA without certificates", tlsfiles.Client{Prefix: "--x.tls", CAFile: garbage}, "--x.tls.ca " + garbage + ": no PEM certificate"},
		{"mismatched pair", tlsfiles.Client{Prefix: "--x.tls", CertFile: p.ClientCertFile, KeyFile: p.KeyFile}, "--x.tls.cert " + p.ClientCertFile + " and --x.tls.key " + p.KeyFile},
		{"key without certificate", tlsfiles.Client{Prefix: "--x.tls", KeyFile: p.KeyFile}, "--x.tls.cert and --x.tls.key go together"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.c.Config()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Config: %v", err)
				}
				if (tc.c.CAFile != "") != (cfg.RootCAs != nil) || (tc.c.CertFile != "") != (cfg.GetClientCertificate != nil) {
					t.Fatalf("Config = %+v; want RootCAs and GetClientCertificate as given", cfg)
				}
				if cfg.GetClientCertificate != nil {
					if c, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{}); err != nil || c == nil || c.Leaf == nil {
						t.Fatalf("GetClientCertificate() = %v, %v; want the pair", c, err)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Config error %v; want one containing %q", err, tc.want)
			}
		})
	}
}
