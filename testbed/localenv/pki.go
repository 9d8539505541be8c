package localenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files of a throwaway certificate authority: one CA, one serving certificate for
// 127.0.0.1 that every component presents, and the service-account signing key pair; and a
// second CA for the front proxy: the client certificate the API server presents to aggregated
// API servers (metrics-server), which trust it to say who the user is. It is kept apart from the
// first CA, as in a real cluster, so that certificate cannot log in to the API server itself.
type pki struct {
	caCert, caKey                 string
	servingCert, servKey          string
	saKey, saPub                  string
	frontProxyCA                  string
	frontProxyCert, frontProxyKey string
	caPEM                         []byte
}

// frontProxyUser is the front proxy's client certificate's name, the only one aggregated API
// servers accept (--requestheader-allowed-names).
const frontProxyUser = "front-proxy-client"

func newPKI(dir string) (*pki, error) {
	p := &pki{
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "serving.crt"), servKey: filepath.Join(dir, "serving.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
		frontProxyCA:   filepath.Join(dir, "front-proxy-ca.crt"),
		frontProxyCert: filepath.Join(dir, "front-proxy-client.crt"), frontProxyKey: filepath.Join(dir, "front-proxy-client.key"),
	}
	now := time.Now()
	ca, caKey, caDER, err := newCA("karpool-local-ca", now)
	if err != nil {
		return nil, err
	}
	servKey, servDER, err := issue(ca, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "karpool-local"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	})
	if err != nil {
		return nil, err
	}
	fpCA, fpCAKey, fpCADER, err := newCA("karpool-local-front-proxy-ca", now)
	if err != nil {
		return nil, err
	}
	fpKey, fpDER, err := issue(fpCA, fpCAKey, &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: frontProxyUser},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	// The API server requires an RSA or ECDSA key for service-account tokens; RSA is what every
	// client library accepts without surprises.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	writes := []struct {
		path  string
		block *pem.Block
	}{
		{p.caCert, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}},
		{p.caKey, ecKeyBlock(caKey)},
		{p.servingCert, &pem.Block{Type: "CERTIFICATE", Bytes: servDER}},
		{p.servKey, ecKeyBlock(servKey)},
		{p.saKey, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}},
		{p.saPub, &pem.Block{Type: "PUBLIC KEY", Bytes: saPub}},
		{p.frontProxyCA, &pem.Block{Type: "CERTIFICATE", Bytes: fpCADER}},
		{p.frontProxyCert, &pem.Block{Type: "CERTIFICATE", Bytes: fpDER}},
		{p.frontProxyKey, ecKeyBlock(fpKey)},
	}
	for _, w := range writes {
		if w.block == nil {
			return nil, fmt.Errorf("encoding %s", w.path)
		}
		if err := os.WriteFile(w.path, pem.EncodeToMemory(w.block), 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// newCA makes a self-signed certificate authority valid for a week.
func newCA(name string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, der, err
}

// issue signs a certificate for a new key with the CA.
func issue(ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	return key, der, err
}

func ecKeyBlock(k *ecdsa.PrivateKey) *pem.Block {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil
	}
	return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
}
