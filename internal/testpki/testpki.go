// Package testpki makes a throwaway certificate authority, a server
// certificate for 127.0.0.1 and localhost, and a client certificate, for
// tests of TLS connections to real servers (ClickHouse, the Kafka-protocol
// broker). Nothing here is meant for production keys.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a certificate authority and the certificates it signed, as PEM
// files under Dir and as parsed values.
type PKI struct {
	Dir string
	// CAFile holds the authority's certificate.
	CAFile string
	// CertFile and KeyFile are the server's certificate (for 127.0.0.1 and
	// localhost) and key.
	CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate (CN
	// "heliostat") and its key.
	ClientCertFile, ClientKeyFile string
	// CAPool holds the authority's certificate.
	CAPool *x509.CertPool
	// Server is the server's certificate and key.
	Server tls.Certificate
}

// New makes a fresh PKI under t.TempDir(); it fails the test on error.
func New(t testing.TB) *PKI {
	t.Helper()
	p, err := Make(t.TempDir())
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	return p
}

// Make writes a fresh PKI to dir.
func Make(dir string) (*PKI, error) {
	p := &PKI{Dir: dir, CAPool: x509.NewCertPool()}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "heliostat test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.CAPool.AddCert(ca)
	p.CAFile = filepath.Join(dir, "ca.crt")
	if err := writePEM(p.CAFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certFile, keyFile string) (tls.Certificate, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return tls.Certificate{}, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return tls.Certificate{}, err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return tls.Certificate{}, err
		}
		if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
			return tls.Certificate{}, err
		}
		if err := writePEM(keyFile, "PRIVATE KEY", keyDER); err != nil {
			return tls.Certificate{}, err
		}
		return tls.LoadX509KeyPair(certFile, keyFile)
	}
	p.CertFile, p.KeyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if p.Server, err = leaf(2, "localhost", x509.ExtKeyUsageServerAuth, p.CertFile, p.KeyFile); err != nil {
		return nil, err
	}
	p.ClientCertFile, p.ClientKeyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if _, err = leaf(3, "heliostat", x509.ExtKeyUsageClientAuth, p.ClientCertFile, p.ClientKeyFile); err != nil {
		return nil, err
	}
	return p, nil
}

// ServerTLS returns a server configuration presenting the server
// certificate; with clientCAs it also requires a client certificate signed
// by the authority.
func (p *PKI) ServerTLS(clientCAs bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
	if clientCAs {
		c.ClientCAs = p.CAPool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
